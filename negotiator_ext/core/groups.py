"""Accounting groups: the GROUP_NAMES tree, submitter-to-group mapping, quota assignment.

Reference section 3: tree construction (rule G1, G2), `GetAssignedGroup` (G3), quota
assignment `hgq_assign_quotas` (G4) and demand (G5). Surplus sharing and the allocation
rounds (G6-G11) build on this tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from .config import GroupConfig, NegotiatorConfig
from .cxxsort import cxx_sort

ROOT = "<none>"


def _ascii_lower(name: str) -> bytes:
    """What strcasecmp compares: the bytes, ASCII letters lower-cased (the C locale)."""
    return name.encode("utf-8", "surrogateescape").lower()


def _ci_less(a: GroupConfig, b: GroupConfig) -> bool:
    """GroupEntry::ci_less: strcasecmp(a, b) < 0."""
    return _ascii_lower(a.name) < _ascii_lower(b.name)


def is_group_name(name: str) -> bool:
    """Rule G3: a customer name without '@' names a group (or the root, `<none>`);
    a submitter's name has one."""
    return "@" not in name


@dataclass
class GroupNode:
    name: str                       # as written in GROUP_NAMES; "<none>" for the root
    static: bool = False            # GROUP_QUOTA_<g> (else dynamic, maybe 0: rule G2)
    config_quota: float = 0.0       # the static number, or the dynamic fraction
    accept_surplus: bool = False
    autoregroup: bool = False
    parent: "GroupNode | None" = None
    children: list["GroupNode"] = field(default_factory=list)

    @property
    def is_root(self) -> bool:
        return self.parent is None


@dataclass(frozen=True)
class GroupQuota:
    """The numbers `condor_userprio -quotas` shows for one group (section 3.9)."""
    name: str
    effective_quota: float          # `quota`
    config_quota: float
    subtree_quota: float
    requested: float                # currently_requested: weighted running + idle demand
    surplus_policy: str             # "regroup" | "byquota" | "no"


class GroupTree:
    """The group tree of one configuration (rule G1) and the name mapping (rule G3)."""

    def __init__(self, config: NegotiatorConfig):
        self.config = config
        self.warnings: list[str] = []
        global_autoregroup = config.group_autoregroup or any(g.autoregroup for g in config.groups)
        self.global_accept_surplus = config.group_accept_surplus or any(
            g.accept_surplus for g in config.groups)
        self.root = GroupNode(ROOT, accept_surplus=True, autoregroup=global_autoregroup)
        self._by_lower: dict[str, GroupNode] = {}
        # GROUP_NAMES sorted with strcasecmp (ci_less) by std::sort: the children's order
        for g in cxx_sort(list(config.groups), _ci_less):
            self._insert(g)
        # breadth-first order from the root (hgq_groups)
        self.nodes: list[GroupNode] = []
        queue = [self.root]
        while queue:
            n = queue.pop(0)
            self.nodes.append(n)
            queue.extend(n.children)
        self._cache: dict[str, GroupNode] = {}  # lower-cased submitter name -> group

    def _insert(self, g: GroupConfig) -> None:
        low = g.name.lower()
        if low in self._by_lower:
            self.warnings.append(f"group {g.name} is listed twice in GROUP_NAMES; ignored")
            return
        parts = g.name.split(".")
        parent = self.root
        for i in range(len(parts) - 1):
            prefix = ".".join(parts[: i + 1]).lower()
            nxt = self._by_lower.get(prefix)
            if nxt is None or nxt.parent is not parent:
                self.warnings.append(f"group {g.name} has no parent group {'.'.join(parts[:i + 1])} "
                                     "in GROUP_NAMES; ignored")
                return
            parent = nxt
        node = GroupNode(
            name=g.name,
            static=g.static_quota is not None,
            config_quota=(g.static_quota if g.static_quota is not None
                          else (g.dynamic_quota if g.dynamic_quota is not None else 0.0)),
            accept_surplus=g.accept_surplus,
            autoregroup=g.autoregroup,
            parent=parent,
        )
        if g.static_quota is None and g.dynamic_quota is None:
            self.warnings.append(f"group {g.name} has no GROUP_QUOTA_ or GROUP_QUOTA_DYNAMIC_; "
                                 "it is a dynamic group with quota 0")
        parent.children.append(node)
        self._by_lower[low] = node

    @property
    def enabled(self) -> bool:
        return len(self.nodes) > 1

    def get(self, name: str) -> GroupNode | None:
        if name == ROOT:
            return self.root
        return self._by_lower.get(name.lower())

    def group_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def assigned_group(self, customer: str) -> GroupNode:
        return self.assigned(customer)[0]

    def assigned(self, customer: str) -> tuple[GroupNode, bool]:
        """Rule G3: the group a customer name is charged to, and whether the name is a
        group name (it has no '@')."""
        is_group = is_group_name(customer)
        node = self.get(customer)
        if node is not None:
            return node, is_group
        if is_group:
            return self.root, True  # a defunct group or a malformed name
        cached = self._cache.get(customer.lower())
        if cached is not None:
            return cached, False
        base = customer[: customer.rfind("@")]
        if "." not in base:
            result = self.root
        else:
            path = base[: base.rfind(".")].split(".")
            result = self.root
            for comp in path:
                nxt = next((c for c in result.children
                            if c.name.rsplit(".", 1)[-1].lower() == comp.lower()), None)
                if nxt is None:
                    break
                result = nxt
        self._cache[customer.lower()] = result
        return result, False

    def charged_records(self, customer: str) -> tuple[tuple[str, ...], list[str]]:
        """Rules A17, A22: the records a match of `customer` is charged to, namely the
        customer's and its assigned group's (once when they are the same record), and the
        records whose HierWeightedResourcesUsed it adds to (`dotted_prefixes` of the
        group)."""
        group = self.assigned_group(customer).name
        return tuple(dict.fromkeys((customer, group))), dotted_prefixes(group)

    def surplus_policy(self, node: GroupNode) -> str:
        """SurplusPolicy as ReportGroups writes it (rule A26)."""
        if node.autoregroup:
            return "regroup"
        if node.accept_surplus:
            return "byquota"
        return "no"

    def assign_quotas(self, pool_size: float, demand: Mapping[str, float] | None = None
                      ) -> dict[str, GroupQuota]:
        """Rule G4 (`hgq_assign_quotas` on the root with the pool size), with demand (G5)
        as `currently_requested`. Returns the numbers per group name. Without GROUP_NAMES
        the accountant still publishes the root, `<none>`, with every quota 0 (and
        Requested 0), as 25.14's does."""
        if not self.enabled:
            return {ROOT: GroupQuota(name=ROOT, effective_quota=0.0, config_quota=0.0,
                                     subtree_quota=0.0, requested=0.0,
                                     surplus_policy=self.surplus_policy(self.root))}
        out: dict[str, GroupQuota] = {}
        demand = {k.lower(): v for k, v in (demand or {}).items()}
        self._assign(self.root, pool_size, demand, out)
        return out

    def _assign(self, node: GroupNode, q: float, demand: dict[str, float],
                out: dict[str, GroupQuota]) -> None:
        """`hgq_assign_quotas` on `node` with quota `q`: its children first, then it.
        (A method rather than a nested function that calls itself: that is a reference
        cycle, left for the cyclic collector every cycle.)"""
        oversub = self.config.allow_quota_oversubscription
        quota = subtree = 0.0
        child_q: dict[str, float] = {}
        if q > 0:
            subtree = q
            ssum = sum(c.config_quota for c in node.children if c.static)
            dsum = sum(c.config_quota for c in node.children if not c.static)
            sa = ssum if oversub else min(ssum, q)
            da = max(0.0, q - sa)
            zs = ssum if ssum > 0 else 1.0
            zd = max(dsum, 1.0)
            for c in node.children:
                child_q[c.name] = c.config_quota * (sa / zs if c.static else da / zd)
            chq = sum(child_q.values())
            quota = q if (oversub and not node.is_root) else q - chq
            quota = max(quota, 0.0)
        for c in node.children:
            self._assign(c, child_q.get(c.name, 0.0), demand, out)
        out[node.name] = GroupQuota(
            name=node.name, effective_quota=quota, config_quota=node.config_quota,
            subtree_quota=subtree, requested=demand.get(node.name.lower(), 0.0),
            surplus_policy=self.surplus_policy(node))


def dotted_prefixes(group: str) -> list[str]:
    """The records HierWeightedResourcesUsed is charged to for a match in `group`: the
    group and every dotted prefix of its name (`a.b.c`, `a.b`, `a`). `<none>` has no
    dots, so the root's figure counts root-group submitters only (rule A17)."""
    parts = group.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def group_demand(tree: GroupTree, submitters: Iterable[Mapping], weighted: bool
                 ) -> dict[str, float]:
    """Rule G5: per group, the summed demand (running + idle) of its submitter ads.

    Each submitter is a mapping with Name, RunningJobs, IdleJobs and optionally
    WeightedRunningJobs / WeightedIdleJobs."""
    out: dict[str, float] = {}
    for s in submitters:
        name = s.get("Name")
        if not isinstance(name, str) or is_group_name(name):
            continue
        g = tree.assigned_group(name)
        if weighted:
            run = s.get("WeightedRunningJobs", s.get("RunningJobs", 0)) or 0
            idle = s.get("WeightedIdleJobs", s.get("IdleJobs", 0)) or 0
        else:
            run = s.get("RunningJobs", 0) or 0
            idle = s.get("IdleJobs", 0) or 0
        out[g.name] = out.get(g.name, 0.0) + float(run) + float(idle)
    return out
