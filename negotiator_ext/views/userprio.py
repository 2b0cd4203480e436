"""The table `condor_userprio` prints, byte for byte, from a list of accountant records.

A port of the display half of HTCondor's ``src/condor_tools/user_prio.cpp`` (25.x):
the option handling in ``main()``, ``CollectInfo``, ``ProcessInfo``, ``PrintInfo``, the
``aCols[]`` column table and the ``LineRecLT`` sort order. The input is the list of ads
the negotiator's modular query returns (what ``condor_userprio -l -allusers`` prints),
in the order it returned them: the order matters, as explained below.

Quirks of the tool that are reproduced on purpose:

* ``CollectInfo`` reads each record into variables declared *outside* its loop, so an
  attribute missing from a record keeps the value of the previous record that had it.
  A cell is printed only if the record itself has the attribute, but carried values
  still reach the output: "Total Usage" of a group without WeightedAccumulatedUsage
  shows the previous record's usage; the usage starts at -1, hence "-0.00" for records
  read before any record with usage (and in the totals, which add those -1s); and the
  24 h filter compares the carried LastUsageTime.
* A record whose LastUsageTime is missing-and-never-seen or 0 counts as -1, so without
  ``-allusers`` it is hidden (shown only if ``LastUsage >= now - 86400``).
* "Time Since Last Usage" and "Last Priority Update" use the LastUpdate of the *first*
  ad, not the clock (``now`` only sets the 24 h filter, like ``time(0)`` in the tool).
* Sorting uses libstdc++'s ``std::sort`` (introsort, not stable), ported below, so ties
  (e.g. many submitters at the same priority) come out in the tool's order.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..core.cxxsort import cxx_sort
from .text import printable

__all__ = ["UserprioOptions", "render_table", "COLUMNS", "Column", "cxx_sort"]


@dataclass(frozen=True)
class UserprioOptions:
    all_fields: bool = False   # -all
    allusers: bool = False     # -allusers
    quotas: bool = False       # -quotas
    grouprollup: bool = False  # -grouprollup (input ads are then already rolled up: group Priority 0, child usage summed in)
    usage: bool = False        # -usage
    priority: bool = False     # -priority


# ---- Detail flags (the enum at the top of user_prio.cpp) -------------------------------
NAME = 0x0001
PRIORITY = 0x0002
FACTOR = 0x0004
GROUP = 0x0008
RES_USED = 0x0010
WT_RES_USED = 0x0020
USE_TIME1 = 0x0040        # usage start time
USE_TIME2 = 0x0080        # last usage time
EFF_QUOTA = 0x0100
CFG_QUOTA = 0x0200
SURPLUS = 0x0400
TREE_QUOTA = 0x0800
REAL_PRIO = 0x1000
SORT_KEY = 0x2000
USE_DELTA_T = 0x4000
ORDER = 0x8000
REQUESTED = 0x10000
CEILING = 0x20000
FLOOR = 0x40000
PRIOS = PRIORITY | FACTOR | REAL_PRIO
USAGE = RES_USED | WT_RES_USED
QUOTAS = EFF_QUOTA | CFG_QUOTA | TREE_QUOTA | SURPLUS | REQUESTED
MOST = (CFG_QUOTA | SURPLUS | PRIORITY | FACTOR | USAGE | USE_DELTA_T | REQUESTED
        | CEILING | FLOOR)
ALL = MOST | QUOTAS | PRIOS | USE_TIME1 | USE_TIME2
DEFAULT = MOST

# Surplus policies
SURPLUS_UNSET, SURPLUS_NONE, SURPLUS_REGROUP, SURPLUS_BYQUOTA, SURPLUS_UNKNOWN = -1, 0, 1, 2, 3

# Sort orders (LineRecLT group_order)
# The LineRecLT orders the options we offer reach (-grouporder and -sortkey, which pick
# the others, are not offered).
SORT_BY_COLUMN1 = 0
SORT_HIER_BY_GROUP_ID = 2
SORT_HIER_BY_DISPLAY_ORDER = 5
SORT_GROUPS_FIRST_BY_NAME = 7

FLT_MAX = 3.4028234663852886e38
MAX_NAME_COLUMN_WIDTH = 99
ACTIVE_WINDOW = 60 * 60 * 24     # without -allusers: users active in the last day
NAME_BUFFER = 128                # char name[128] in CollectInfo
POLICY_BUFFER = 32               # char policy[32]


@dataclass(frozen=True)
class Column:
    flag: int
    width: int
    title1: str
    title2: str


# aCols[] in user_prio.cpp, in print order.
COLUMNS: tuple[Column, ...] = (
    Column(GROUP, 5, "Group", "Id"),
    Column(ORDER, 9, "Group", "Order"),
    Column(SORT_KEY, 9, "Group", "Sort Key"),
    Column(EFF_QUOTA, 9, "Effective", "Quota"),
    Column(CFG_QUOTA, 9, "Config", "Quota"),
    Column(SURPLUS, 7, "Use", "Surplus"),
    Column(TREE_QUOTA, 9, "Subtree", "Quota"),
    Column(PRIORITY, 12, "Effective", "Priority"),
    Column(REAL_PRIO, 8, "Real", "Priority"),
    Column(FACTOR, 9, "Priority", "Factor"),
    Column(RES_USED, 6, "Wghted", "In Use"),
    Column(WT_RES_USED, 12, "Total Usage", "(wghted-hrs)"),
    Column(USE_TIME1, 16, "Usage", "Start Time"),
    Column(USE_TIME2, 16, "Last", "Usage Time"),
    Column(USE_DELTA_T, 10, "Time Since", "Last Usage"),
    Column(REQUESTED, 10, "Weighted", "Requested"),
    Column(FLOOR, 9, "Submitter", "Floor"),
    Column(CEILING, 9, "Submitter", "Ceiling"),
)


@dataclass
class _LineRec:
    """struct LineRec; defaults are what CollectInfo sets before reading a record
    (fields it leaves uninitialised are 0 / "" / False here)."""
    last_usage: int
    name: str = ""
    priority: float = 0.0
    res: int = 0
    wt_res: float = 0.0
    acc_usage: float = 0.0
    requested: float = 0.0
    factor: float = 0.0
    begin_usage: int = 0
    acct_group: str = ""
    is_group: bool = False
    has: int = 0
    effective_quota: float = 0.0
    config_quota: float = 0.0
    subtree_quota: float = 0.0
    ceiling: float = -1.0
    floor: float = -1.0
    sort_key: float = 0.0
    surplus: int = SURPLUS_UNSET
    group_id: int = 0
    display_order: float = 0.0


@dataclass
class _State:
    """The tool's globals (and main()'s locals) that drive the layout."""
    detail: int                 # DetailFlag: columns to print
    dash_quota: bool            # DashQuota
    min_last_usage: int         # MinLastUsageTime
    group_rollup: bool
    hier: bool = True           # HierFlag
    hide_groups: bool = False
    hide_users: bool = False
    hide_none_group: bool = True   # HideNoneGroupIfPossible
    users_have_quotas: bool = False
    avail: int = 0              # DetailAvailFlag
    global_surplus: int = SURPLUS_UNSET


# ---- public entry point ------------------------------------------------------------------

def render_table(ads: Sequence[Mapping[str, Any]], *, now: int,
                 options: UserprioOptions = UserprioOptions()) -> str:
    """What `condor_userprio <options>` prints for these accountant records.

    `ads` are the negotiator's accounting ads as plain dicts, in reply order; `now` is
    the tool's clock (only used for the 24 h activity filter). Returns "" for no ads,
    as the tool prints nothing then.
    """
    st = _options_state(options, now)
    if not ads:
        return ""
    recs = _collect_info(ads, st)
    recs = _process_info(recs, st)
    tm_last = _lookup_int(ads[0], "LastUpdate")
    return _print_info(0 if tm_last is None else tm_last, recs, st)


def _options_state(options: UserprioOptions, now: int) -> _State:
    """main(): the option flags, the default columns, and 'prio only => no groups'."""
    detail = 0
    if options.quotas:
        detail |= QUOTAS
    if options.all_fields:
        detail |= ALL
    if options.usage:
        detail |= USAGE | USE_TIME1 | USE_TIME2
    if options.priority:
        detail |= PRIOS
    if not detail:
        detail = DEFAULT
    st = _State(detail=detail, dash_quota=options.quotas,
                min_last_usage=-1 if options.allusers else now - ACTIVE_WINDOW,
                group_rollup=options.grouprollup)
    # "if showing only prio, don't bother showing groups" (no -flat/-hierarchical here)
    if not (st.detail & ~PRIOS):
        st.hier = False
        st.hide_groups = not st.hier
    return st


# ---- attribute lookups with the ClassAd library's type rules -----------------------------

def _lookup_float(ad: Mapping[str, Any], attr: str) -> float | None:
    """ClassAd::LookupFloat: any number (bool counts as 0/1)."""
    v = ad.get(attr)
    return float(v) if isinstance(v, (bool, int, float)) else None


def _lookup_int(ad: Mapping[str, Any], attr: str) -> int | None:
    """ClassAd::LookupInteger: any number, reals truncated."""
    v = ad.get(attr)
    if isinstance(v, float):
        return int(v) if math.isfinite(v) else None
    return int(v) if isinstance(v, (bool, int)) else None


def _lookup_string(ad: Mapping[str, Any], attr: str, buf_size: int | None = None) -> str | None:
    """ClassAd::LookupString; into a char buffer the value is cut to buf_size-1 chars."""
    v = ad.get(attr)
    if not isinstance(v, str):
        return None
    return v if buf_size is None else v[:buf_size - 1]


def _lookup_bool(ad: Mapping[str, Any], attr: str) -> bool | None:
    """ClassAd::LookupBool (EvaluateAttrBoolEquiv): bools, and numbers != 0."""
    v = ad.get(attr)
    return bool(v) if isinstance(v, (bool, int, float)) else None


# ---- CollectInfo -------------------------------------------------------------------------

@dataclass
class _Carry:
    """CollectInfo's locals declared outside the per-record loop: they keep the last
    value read when a later record lacks the attribute."""
    factor: float = 0.0
    acc_usage: float = -1.0
    ceiling: float = -1.0
    floor: float = -1.0
    res_used: int = 0
    begin_usage: int = 0
    last_usage: int = 0
    requested: float = 0.0
    effective_quota: float = 0.0
    config_quota: float = 0.0
    subtree_quota: float = 0.0


def _collect_info(ads: Sequence[Mapping[str, Any]], st: _State) -> list[_LineRec]:
    n = len(ads)
    c = _Carry()
    recs: list[_LineRec] = []
    need_group_id_fixup = False
    for i, ad in enumerate(ads, start=1):
        rec = _LineRec(last_usage=st.min_last_usage)
        recs.append(rec)
        name = _lookup_string(ad, "Name", NAME_BUFFER)
        priority = _lookup_float(ad, "Priority") if name is not None else None
        if name is None or priority is None:
            continue        # the record stays a blank line with default values
        has = PRIORITY | NAME

        if (v := _lookup_float(ad, "PriorityFactor")) is not None:
            c.factor = v
            has |= FACTOR
            if v > 0:
                has |= REAL_PRIO
        if (v := _lookup_float(ad, "WeightedAccumulatedUsage")) is not None:
            c.acc_usage, has = v, has | USAGE
        if (v := _lookup_float(ad, "Ceiling")) is not None:
            c.ceiling, has = v, has | CEILING
        if (v := _lookup_float(ad, "Floor")) is not None:
            c.floor, has = v, has | FLOOR
        if (v := _lookup_float(ad, "Requested")) is not None:
            c.requested, has = v, has | REQUESTED
        if (v := _lookup_int(ad, "BeginUsageTime")) is not None:
            c.begin_usage, has = v, has | USE_TIME1
        if (v := _lookup_int(ad, "LastUsageTime")) is not None:
            c.last_usage, has = v, has | USE_TIME2 | USE_DELTA_T
        if (v := _lookup_int(ad, "ResourcesUsed")) is not None:
            c.res_used, has = v, has | USAGE
        wt_res = _lookup_float(ad, "WeightedResourcesUsed")
        if wt_res is None:
            wt_res = float(c.res_used)
        else:
            has |= WT_RES_USED

        acct_group = _lookup_string(ad, "AccountingGroup")
        if acct_group is None:
            acct_group = "<none>"
        is_group = _lookup_bool(ad, "IsAccountingGroup") or False

        if (v := _lookup_float(ad, "EffectiveQuota")) is not None:
            c.effective_quota, has = v, has | EFF_QUOTA
        if (v := _lookup_float(ad, "ConfigQuota")) is not None:
            c.config_quota, has = v, has | CFG_QUOTA

        if is_group:
            rec.group_id = 0 if name in ("<none>", ".") else -i
            regroup = _lookup_bool(ad, "GroupAutoRegroup")
            if regroup is not None:
                has |= SURPLUS
            rec.surplus = SURPLUS_REGROUP if regroup else SURPLUS_NONE
            if regroup:
                st.global_surplus = SURPLUS_REGROUP
            policy = _lookup_string(ad, "SurplusPolicy", POLICY_BUFFER)
            if policy is not None:
                has |= SURPLUS
                rec.surplus = {"regroup": SURPLUS_REGROUP, "byquota": SURPLUS_BYQUOTA,
                               "no": SURPLUS_NONE}.get(policy.lower(), SURPLUS_UNKNOWN)
                if rec.surplus in (SURPLUS_REGROUP, SURPLUS_BYQUOTA):
                    st.global_surplus = rec.surplus
            if (v := _lookup_float(ad, "GroupSortKey")) is not None:
                rec.sort_key, has = v, has | SORT_KEY
            if (v := _lookup_float(ad, "SubtreeQuota")) is not None:
                c.subtree_quota, has = v, has | TREE_QUOTA
            if st.group_rollup and not (has & EFF_QUOTA):
                has &= ~PRIOS
            has &= ~PRIORITY        # GroupPrioIsMeaningless
        else:
            if acct_group in ("<none>", "."):
                rec.group_id = 0
            else:
                rec.group_id = -n * 2      # fixed up below
                need_group_id_fixup = True
            if has & (EFF_QUOTA | CFG_QUOTA):
                st.users_have_quotas = True

        if rec.group_id != 0:
            has |= GROUP
        if c.last_usage == 0:
            c.last_usage = -1
        st.avail |= has

        rec.has = has
        rec.name = name
        rec.priority = priority
        rec.res = c.res_used
        rec.wt_res = wt_res
        rec.requested = c.requested
        rec.factor = c.factor
        rec.begin_usage = c.begin_usage
        rec.last_usage = c.last_usage
        rec.acc_usage = c.acc_usage
        rec.ceiling = c.ceiling
        rec.floor = c.floor
        rec.acct_group = acct_group
        rec.is_group = is_group
        rec.effective_quota = c.effective_quota
        rec.config_quota = c.config_quota
        rec.subtree_quota = c.subtree_quota

    # don't print columns if the negotiator didn't send us any data for them
    if not (st.avail & USAGE):
        st.detail &= ~USAGE
    if not (st.avail & FACTOR):
        st.detail &= ~FACTOR
    if not (st.avail & USE_TIME1):
        st.detail &= ~USE_TIME1
    if not (st.avail & USE_TIME2):
        st.detail &= ~(USE_TIME2 | USE_DELTA_T)
    if not st.dash_quota and not (st.avail & QUOTAS):
        st.detail &= ~QUOTAS

    if need_group_id_fixup:
        recs = _fixup_group_ids(recs, st)
    return recs


def _fixup_group_ids(recs: list[_LineRec], st: _State) -> list[_LineRec]:
    """Number the groups in name order (<none> stays 0, sorted last) and give each user
    its group's id and display order."""
    recs = cxx_sort(recs, _less(st.detail, SORT_GROUPS_FIRST_BY_NAME, True))
    n_groups = 0
    ix_none = 0
    for i, r in enumerate(recs):
        if not r.is_group:
            break
        n_groups += 1
        if r.group_id < 0:
            r.group_id = n_groups
        else:
            ix_none = i
        if st.detail & PRIORITY:
            # if sort key not supplied, use group priority as an approximation
            if st.avail & SORT_KEY:
                r.display_order = r.sort_key
            else:
                r.display_order = r.priority if r.group_id else FLT_MAX
        elif st.detail & USAGE:
            r.display_order = r.acc_usage / 3600.0
        else:
            r.display_order = float(r.group_id) if r.group_id else FLT_MAX
        r.has |= ORDER
        st.avail |= ORDER

    for r in recs[n_groups:]:
        if r.group_id >= 0:
            r.display_order = recs[ix_none].display_order
            r.has |= recs[ix_none].has & ORDER
            continue
        for g in recs[:n_groups]:
            if r.acct_group == g.name:
                r.group_id = g.group_id
                r.display_order = g.display_order
                r.has |= g.has & ORDER
                break
    return recs


# ---- ProcessInfo -------------------------------------------------------------------------

def _process_info(recs: list[_LineRec], st: _State) -> list[_LineRec]:
    """Decide hierarchical layout, drop quota columns for flat tables, sort."""
    all_users_in_none_group = True
    for r in recs:
        if r.last_usage < st.min_last_usage:
            continue
        if r.group_id > 0:
            all_users_in_none_group = False
            st.hide_none_group = False
            break

    # hierarchical only if group data came back and a visible record is in a real group
    if not (st.avail & GROUP) or (st.hide_none_group and all_users_in_none_group):
        st.hier = False

    # if not showing groups, don't show quota fields unless explicitly requested
    if st.hide_groups or all_users_in_none_group:
        if not st.dash_quota and not st.users_have_quotas:
            st.detail &= ~QUOTAS

    # don't show users if we are only showing group-only columns
    if (st.detail & QUOTAS) and not (st.detail & ~QUOTAS) and not st.users_have_quotas:
        st.hide_users = True

    order = SORT_BY_COLUMN1
    none_last = False
    if st.hier:
        none_last = st.global_surplus == SURPLUS_REGROUP
        order = SORT_HIER_BY_GROUP_ID
        if st.detail & (PRIORITY | USAGE):
            order = SORT_HIER_BY_DISPLAY_ORDER
    return cxx_sort(recs, _less(st.detail, order, none_last))


def _less(detail: int, group_order: int, none_last: bool) -> Callable[[_LineRec, _LineRec], bool]:
    """LineRecLT::operator()."""

    def by_group_id(a: _LineRec, b: _LineRec, secondary: Callable[[_LineRec], float] | None,
                    none_last: bool) -> bool | None:
        if a.group_id != b.group_id:
            if none_last:
                if not a.group_id:
                    return False
                if not b.group_id:
                    return True
            if secondary is not None:
                ka, kb = secondary(a), secondary(b)
                if ka < kb or ka > kb:
                    return ka < kb
            return a.group_id < b.group_id
        if a.is_group != b.is_group:
            return a.is_group > b.is_group
        return None

    def less(a: _LineRec, b: _LineRec) -> bool:
        if group_order:
            res: bool | None = None
            if group_order == SORT_HIER_BY_GROUP_ID:
                res = by_group_id(a, b, None, none_last)
            elif group_order == SORT_HIER_BY_DISPLAY_ORDER:
                res = by_group_id(a, b, lambda r: r.display_order, none_last)
            elif group_order == SORT_GROUPS_FIRST_BY_NAME:
                if a.is_group != b.is_group:
                    res = a.is_group > b.is_group
                elif a.is_group:
                    if none_last and not a.group_id:
                        res = False
                    elif none_last and not b.group_id:
                        res = True
                    else:
                        res = a.name < b.name
            if res is not None:
                return res
        # order submitters by priority, usage or name depending on the columns shown
        if detail & PRIORITY:
            return a.priority < b.priority
        if detail & USAGE:
            return a.acc_usage < b.acc_usage
        return a.name < b.name

    return less


# ---- text helpers (CopyAndPadToWidth, FormatFloat, format_time.cpp) -----------------------

PAD_RIGHT, PAD_LEFT, PAD_CENTER = 0, 1, 2


def _pad(src: str | None, cch: int, fill: str = " ", pad: int = PAD_RIGHT) -> str:
    """CopyAndPadToWidth(dest, src, cch, fill, pad): always cch-1 characters."""
    out = ""
    remain = cch
    n_src = len(src) + 1 if src is not None else 0
    if pad == PAD_LEFT and remain > n_src:
        out, remain = fill * (remain - n_src), n_src
    if pad == PAD_CENTER:
        left = int((remain - n_src) / 2)          # C division truncates toward zero
        if left > 0:
            out, remain = fill * left, remain - left
    if src:
        out += src[:remain]
        remain -= len(src[:remain])
    out += fill * remain
    return out[:cch - 1]


def _fmt_float(width: int, decimals: int, value: float) -> str:
    """FormatFloat: %W.Df, or %.(W-6)g if that is too wide, right-aligned in W chars."""
    s = "%*.*f" % (width, decimals, value)
    if len(s) > width:
        s = "%.*g" % (width - 6, value)
    return _pad(s, width + 1, " ", PAD_LEFT)


def format_date(t: int) -> str:
    """format_date(): "month/day hour:minute" in local time."""
    if t < 0:
        return "    ???    "
    tm = time.localtime(t)
    return "%2d/%-2d %02d:%02d" % (tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min)


def format_date_year(t: int) -> str:
    """format_date_year(): "month/day/year hour:minute" in local time."""
    if t < 0:
        return "    ???    "
    tm = time.localtime(t)
    return "%2d/%02d/%-4d %02d:%02d" % (tm.tm_mon, tm.tm_mday, tm.tm_year, tm.tm_hour, tm.tm_min)


def format_time_nosecs(secs: int) -> str:
    """format_time_nosecs(): "ddd+hh:mm"."""
    if secs < 0:
        return "[?????]"
    days, secs = divmod(secs, 86400)
    hours, secs = divmod(secs, 3600)
    return "%3d+%02d:%02d" % (days, hours, secs // 60)


def _fmt_date_time(cch: int, t: int, zero: str) -> str:
    """FormatDateTime (always called with a time-zero text)."""
    return _pad(zero if t <= 0 else format_date_year(t), cch, " ", PAD_LEFT)


def _fmt_delta_time(cch: int, delta: int, zero: str) -> str:
    """FormatDeltaTime (always called with a delta-zero text)."""
    return _pad(zero if delta <= 0 else format_time_nosecs(delta), cch, " ", PAD_LEFT)


def _surplus_name(surplus: int) -> str:
    return {SURPLUS_UNSET: "", SURPLUS_NONE: "no", SURPLUS_REGROUP: "Regroup",
            SURPLUS_BYQUOTA: "ByQuota"}.get(surplus, "n/a")


# ---- PrintInfo ---------------------------------------------------------------------------

def _print_info(tm_last: int, recs: list[_LineRec], st: _State) -> str:
    cols = [col for col in COLUMNS if col.flag & st.detail]
    name_w = _name_width(recs, st)
    lines = ["Last Priority Update: %s" % format_date(tm_last)]

    def row(name_part: str, cells: Callable[[Column], str]) -> str:
        return name_part + "".join(" " + cells(col) for col in cols)

    lines.append(row(_pad("Group" if st.hier else None, name_w + 1),
                     lambda col: _pad(col.title1, col.width + 1, " ", PAD_CENTER)))
    title2 = "  User Name" if st.hier else "User Name"
    if st.hide_users:
        title2 = "Name" if st.hier else "Group Name"
    lines.append(row(_pad(title2, name_w + 1),
                     lambda col: _pad(col.title2, col.width + 1, " ", PAD_CENTER)))
    rule = row(_pad(None, name_w + 1, "-"), lambda col: _pad(None, col.width + 1, "-"))
    lines.append(rule)

    user_count = 0
    tot_wt_res = 0.0
    tot_acc_usage = 0.0
    tot_begin_usage = 0
    for r in recs:
        if r.last_usage < st.min_last_usage:
            continue
        if not r.is_group:
            user_count += 1
            if st.hide_users:
                continue
        else:
            if st.hide_groups or (not st.hier and st.hide_none_group and not r.group_id):
                continue
            st.hide_none_group = False      # if we show any groups, then show the none group

        # names come from untrusted ads: shown (and measured, _name_width) `printable`,
        # which changes nothing in an ordinary name
        if not st.hier or r.is_group:
            name_part = _pad(printable(r.name), name_w + 1)
        else:
            short = r.name[len(r.acct_group) + 1:] if r.group_id > 0 else r.name
            name_part = "  " + _pad(printable(short), name_w + 1 - 2)
        lines.append(row(name_part, lambda col: _cell(col, r, tm_last)))

        if not r.is_group:
            tot_wt_res += r.wt_res
            tot_acc_usage += r.acc_usage
            tot_begin_usage = min(tot_begin_usage, r.begin_usage)

    lines.append(rule)

    def footer_cell(col: Column) -> str:
        cch = col.width + 1
        if col.flag == SURPLUS:
            return _pad(_surplus_name(st.global_surplus), cch)
        if col.flag == RES_USED:
            return _fmt_float(col.width, 0, tot_wt_res)
        if col.flag == WT_RES_USED:
            return _fmt_float(col.width, 2, tot_acc_usage / 3600.0)
        if col.flag == USE_TIME1:
            return _fmt_date_time(cch, tot_begin_usage, "")
        if col.flag == USE_TIME2:
            return _fmt_date_time(cch, st.min_last_usage, "")
        if col.flag == USE_DELTA_T:
            if st.min_last_usage <= 0:
                return _pad("", cch, " ", PAD_LEFT)
            return _fmt_delta_time(cch, tm_last - st.min_last_usage, "<now>")
        return _pad(None, cch)

    lines.append(row(_pad("Number of users: %d" % user_count, name_w + 1), footer_cell))
    return "".join(line + "\n" for line in lines)


def _name_width(recs: list[_LineRec], st: _State) -> int:
    """The width of the name column (max_name in PrintInfo), of the names as shown
    (`printable`)."""
    max_name = 10
    for r in recs:
        if r.last_usage >= st.min_last_usage:
            length = len(printable(r.name))
            if st.hier and not r.is_group:
                length += 2
                if r.group_id != 0:
                    length -= len(printable(r.acct_group))
            max_name = max(max_name, length)
    max_name = min(max_name, MAX_NAME_COLUMN_WIDTH)
    max_name = max(max_name, len("Number of users: %d" % len(recs)))
    if st.hier:
        max_name += 2
    return max_name


def _cell(col: Column, r: _LineRec, tm_last: int) -> str:
    """One data cell of a record: blank if the record lacks the attribute, except that
    groups show "n/d" for missing quota / sort key data."""
    w, cch = col.width, col.width + 1
    if not (r.has & col.flag):
        if r.is_group and col.flag & (QUOTAS | SORT_KEY):
            return _pad("n/d", cch, " ", PAD_LEFT)
        return _pad(None, cch)
    f = col.flag
    if f == GROUP:
        return _fmt_float(w, 0, r.group_id * 1.0)
    if f == ORDER:
        return _fmt_float(w, 2, r.display_order)
    if f == SURPLUS:
        return _pad(_surplus_name(r.surplus) if r.group_id else "yes", cch)
    if f == EFF_QUOTA:
        return _fmt_float(w, 2, r.effective_quota)
    if f == CFG_QUOTA:
        return _fmt_float(w, 2, r.config_quota)
    if f == TREE_QUOTA:
        return _fmt_float(w, 2, r.subtree_quota)
    if f == SORT_KEY:
        if r.sort_key < 3.40282001e38:   # FLT_MAX after a round trip through ClassAds
            return _fmt_float(w, 2, r.sort_key)
        return _pad("<last>", cch, " ", PAD_LEFT)
    if f == PRIORITY:
        return _fmt_float(w, 2, r.priority)
    if f == REAL_PRIO:
        return _fmt_float(w, 2, r.priority / r.factor if r.factor > 0 else 0.0)
    if f == FACTOR:
        return _fmt_float(w, 2, r.factor) if r.factor > 0 else _pad(None, cch)
    if f == RES_USED:
        return _fmt_float(w, 0, r.wt_res)
    if f == REQUESTED:
        return _fmt_float(w, 0, r.requested)
    if f == WT_RES_USED:
        return _fmt_float(w, 2, r.acc_usage / 3600.0)
    if f == USE_TIME1:
        return _fmt_date_time(cch, r.begin_usage, "")
    if f == USE_TIME2:
        return _fmt_date_time(cch, r.last_usage, "")
    if f == USE_DELTA_T:
        return _fmt_delta_time(cch, tm_last - r.last_usage, "<now>")
    if f == CEILING:
        return _fmt_float(w, 2, r.ceiling) if r.ceiling > -1.0 else _pad(None, cch)
    if f == FLOOR:
        return _fmt_float(w, 2, r.floor) if r.floor > 0.0 else _pad(None, cch)
    return _pad(None, cch)
