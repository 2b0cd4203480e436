"""What a cycle works out of each slot alone, before the slots are sorted into classes
(`core.slot_classes`): the first pass (`scan_slot`: what the slot's expressions reach,
in the slot and outside it, looked up in the job) and the second, once the jobs are
known (`profile_slot`: the slot's class key and its static ranks, the expressions no
job can change, evaluated once per distinct set of texts they reach). What a slot's
texts give is kept in its memo from pass to pass (`Slot.memo`). A half of the Matcher
(`core.matchmaking`), whose state it reads."""

from __future__ import annotations

import operator

from . import classads, consumption
from .classads import DBL_MAX
from .adtext import texts_ad
from .match_list import Slot

_EMPTY = classads.ClassAd()
_VARIES = object()      # profile_slot: MY.Rank > MY.CurrentRank depends on the job
_MISSING = object()
_fams = operator.attrgetter("fams")
_MEMO_TOKENS: dict[tuple, str] = {}


def memo_token(key: tuple, kind: str = "matcher") -> str:
    """A short string standing for `key` in a slot's memo for as long as the process
    lives (the same key, the same token): a memo is asked once a slot every pass, and a
    small string hashes at once where a large tuple is hashed anew each time. (Keys are
    what a config and a pool's jobs give: a few in a process's life.) `kind` names who
    keeps it (the matcher's entries, or the cycle's candidate facts)."""
    got = _MEMO_TOKENS.get((kind, key))
    if got is None:
        got = _MEMO_TOKENS[(kind, key)] = f"{kind}-{len(_MEMO_TOKENS)}"
    return got


def distinct_families(slots: list[Slot]) -> dict[int, tuple]:
    """id -> the family tuples (`Slot.fams`, shared by slots alike) of `slots`, each
    once."""
    fams = list(map(_fams, slots))
    return dict(zip(map(id, fams), fams))


class SlotProfiles:
    """The Matcher's per-slot passes; the state they read (the families, the memory's
    caches, the projectors, the interning) is the Matcher's own."""

    def scan_slot(self, slot: Slot) -> None:
        """First pass over a slot: what its expressions reach, in it and outside it
        (the outside names are looked up in the job). A slot's memo (`Slot.memo`) keeps
        what its texts give from pass to pass, for a slot the cycle wrote nothing into
        but the config's NEGOTIATOR_MATCH_EXPRS (no current user's figures, no
        CurrentRank, no consumption policy): the others' memos are not used."""
        if not slot.texts:
            slot.texts = {n.lower(): t for n, t in classads.attribute_texts(slot.ad)}
        memo = slot.memo
        if memo is not None and (slot.cp or slot.live or "preemptingrank" in slot.texts):
            memo = slot.memo = None
        get = slot.texts.get
        key = memo.get(self._memo_key) if memo is not None else None
        if key is None:
            key = tuple(self._projector(names, self._seen_outside)(get)
                        for _, _, names in self._families)
        # slots alike share one tuple (10,000 alike static slots: one; in a long run,
        # from cycle to cycle): the job names they reach are added once a cycle
        got = self._slot_fams.get(key)
        if got is None:
            got = self._slot_fams[key] = (key, tuple(
                (fam, expr, seen, outside)
                for (fam, expr, _), (seen, outside) in zip(self._families, key)))
        if memo is not None:
            memo[self._memo_key] = got[0]
        slot.fams = got[1]
        if id(got[1]) not in self._fams_seen:
            self._see(got[1])
        if slot.cp:
            # a consumption policy is evaluated against the request too (P3-P5): what it
            # reads of the job, and the Request<asset> it overrides, tell requests apart
            assets = consumption.asset_names(slot.ad)
            roots = frozenset(f"consumption{a}" for a in assets)
            _, outside = self._projector(roots, self._seen_outside)(get)
            self.job_names_seen_by_slots.update(n for n in outside if "." not in n)
            self.job_names_seen_by_slots.update(
                n for a in assets for n in (f"request{a}", f"_condor_request{a}"))

    def see_slots(self, slots: list[Slot]) -> None:
        """The job names the expressions of `slots` (scanned in an earlier cycle: the
        ones kept, `Slot.carried`) reach outside them, looked up in the jobs."""
        for i, f in distinct_families(slots).items():
            if i not in self._fams_seen:
                self._see(f)

    def _see(self, fams: tuple) -> None:
        self._fams_seen.add(id(fams))
        for _, _, _, outside in fams:
            self.job_names_seen_by_slots.update(n for n in outside if "." not in n)

    # Families whose verdict is always kept per class (their inputs go into the key).
    _ALWAYS_DEPENDENT = ("req", "rankcond", "preq")

    def profile_slot(self, slot: Slot) -> None:
        """Second pass, once the jobs are known: the slot's class key and its static
        (job-independent) ranks; what the slot's texts give under this plan is kept in
        its memo (`scan_slot`)."""
        live = self.live_remote is not None and bool(slot.live)
        plan = self._plans.get((id(slot.fams), live, id(self.live_names)))
        if plan is None:
            plan = self._plan(slot.fams, live)
        dependent, key_names, statics, rankcond, req_names, live_req, memo_key = plan
        memo = slot.memo
        got = memo.get(memo_key) if memo is not None else None
        if got is None:
            static = {"pre": -DBL_MAX, "post": -DBL_MAX, "prank": -DBL_MAX}
            for fam, expr, seen in statics:
                static[fam] = self._static(fam, expr, slot, seen)
            rank_static = slot.rank_static
            if rankcond is not None:
                rank_static = (None if rankcond is _VARIES
                               else self._static("rankcond", rankcond[0], slot,
                                                 rankcond[1]) is True)
            get = slot.texts.get
            got = ((static["pre"], static["post"], static["prank"]), rank_static,
                   tuple(map(get, key_names)), tuple(map(get, req_names)))
            if memo is not None:
                # alike slots' memos share one
                got = memo[memo_key] = self._profiles.setdefault(got, got)
        slot.static, slot.rank_static, proj, req = got
        slot.req_id = self.intern(("req", req_names, req))
        slot.live_req = live_req
        slot.views = {}
        slot.key = (dependent, key_names, proj, slot.weight, slot.current_user, slot.live,
                    slot.claimer_schedd, slot.partitionable,
                    ("cp", self._serial, slot.index, slot.version) if slot.cp else None)
        slot.key_id = self.intern(("slot", slot.key))
        slot.class_keys = {}

    def plan_signature(self, fams: tuple) -> tuple:
        """What `profile_slot` makes of a slot with families `fams` depends on, beside
        the slot's texts: its plan's memo key (and whether its Requirements read live
        usage). Slots kept from the last cycle keep their profiles while it is the same
        (core.kept_classes)."""
        plan = self._plans.get((id(fams), False, id(self.live_names)))
        if plan is None:
            plan = self._plan(fams, False)
        return plan[6], plan[5]

    def _plan(self, fams: tuple, live: bool) -> tuple:
        """What `profile_slot` works out the same way for every slot sharing `fams` (the
        expression families alike slots share, `scan_slot`): which families depend on
        the job (their names go into the class key, sorted), which are static (evaluated
        per slot, cached per texts), and what the slot's own Requirements read."""
        key_names: set[str] = set()
        dependent: list[str] = []
        statics = []
        rankcond = None
        for fam, expr, seen, outside in fams:
            # an expression that reads the current user's live usage changes during the
            # cycle: it is evaluated with the verdicts, never kept as a static value
            varies = any(("." in n) or self._job_has_attr(n) for n in outside) or (
                live and not self.live_names.isdisjoint(seen))
            dep = fam in self._ALWAYS_DEPENDENT or varies
            if fam == "rankcond":
                rankcond = _VARIES if varies else (expr, seen)
            if dep:
                dependent.append(fam)
                key_names |= seen
            elif fam in ("pre", "post", "prank"):
                statics.append((fam, expr, seen))
        req_seen = next(seen for fam, _, seen, _ in fams if fam == "req")
        key_names = tuple(sorted(key_names))
        req_names = tuple(sorted(req_seen))
        # what a slot's memo keeps under this plan (profile_slot) depends on these and
        # on the config's expressions (scan_slot's memo key): a small token for them
        memo_key = memo_token(("profile", self._memo_key, tuple(dependent), key_names,
                               tuple((fam, seen) for fam, _, seen in statics),
                               rankcond if rankcond in (None, _VARIES) else rankcond[1],
                               req_names))
        plan = (tuple(dependent), key_names, tuple(statics), rankcond, req_names,
                live and not self.live_names.isdisjoint(req_seen), memo_key)
        # (keyed by the shared tuple's id: _slot_fams keeps every such tuple alive)
        self._plans[(id(fams), live, id(self.live_names))] = plan
        return plan

    def _static(self, fam: str, expr, slot: Slot, seen: frozenset):
        """A slot expression no job can change, evaluated once per distinct set of the
        texts it reaches (ranks: EvalNegotiatorMatchRank; rankcond: its value)."""
        names = self._sorted_names.get(seen)
        if names is None:
            names = self._sorted_names[seen] = tuple(sorted(seen))
        key = (fam, names, tuple(map(slot.texts.get, names)))
        got = self._statics.get(key, _MISSING)
        if got is _MISSING:
            ad = slot.ad
            if type(ad) is classads.LazyAd and not ad.made() and not any(
                    t is not None and "eval(" in t for t in key[2]):
                # an ad not parsed yet is its texts: the value is the same in an ad of
                # the texts it reaches, which is far quicker to parse (but for a value
                # a file wrote as eval("..."), which the reader unwraps)
                ad = texts_ad(zip(names, key[2]))
            if fam == "rankcond":
                got = classads.eval_match(expr, ad, _EMPTY)
            else:
                got = self._neg_rank(expr, ad, _EMPTY)
            self._statics[key] = got
        return got
