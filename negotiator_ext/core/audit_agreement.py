"""The fairness audit's real-versus-shadow agreement (`core.audit`): per comparison,
the most divergent ones and their details, and the real cycles that ran out of
time."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from .audit_frames import _EPS, _frame, _num
from .figures import limit_figure


# ---------------------------------------------------------------- shadow agreement

_AGREE_COLUMNS = ["pass_uuid", "anchor", "time", "shadow_pass", "source", "real_cycle_time",
                  "real_matches", "shadow_matches", "agreed", "real_in_shadow",
                  "shadow_in_real", "equivalent_agreement", "count_agreement",
                  "unexplained_agreement", "worst", "max_abs_drift", "notes", "comparisons",
                  "aligned", "why"]


def out_of_time(comparisons: pd.DataFrame) -> pd.DataFrame:
    """The compared real cycles that ran out of time (NEGOTIATOR_MAX_TIME_PER_*): when,
    which schedds and how many submitters, the groups ours served and the real cycle did
    not, and whether the compared pass had predicted it (core.time_limits)."""
    cols = ["pass_uuid", "time", "schedds", "submitters", "groups_not_served",
            "n_groups_not_served", "predicted"]
    rows = []
    for uuid, when, tl in zip(comparisons.get("pass_uuid", []), comparisons.get("time", []),
                              comparisons.get("time_limits", [])):
        real = (tl or {}).get("real") or {}
        if not (real.get("schedds") or real.get("submitters")):
            continue
        said = tl.get("predicted_agrees") or "no prediction"
        groups = list(tl.get("groups_not_served") or ())
        rows.append({"pass_uuid": uuid, "time": when,
                     "schedds": ", ".join(real.get("schedds") or ()),
                     "submitters": len(real.get("submitters") or ()),
                     "groups_not_served": ", ".join(groups),
                     "n_groups_not_served": len(groups), "predicted": said})
    return _frame(rows, cols)


def anchor(uuid: str) -> str:
    """The HTML anchor of a compared pass's details."""
    return f"pass-{uuid[:12]}"


def agreement(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Real-versus-shadow agreement per comparison, oldest first: the recording pass, the
    compared pass (`shadow_pass`), the figures of `core.compare`, and `worst`: the lower
    of equivalent_agreement and count_agreement (NaN for a gap: no figures).
    `comparisons`: how many the row stands for (a summarised hour's row: the means of its
    passes' comparisons, source "hour")."""
    c = comparisons.copy()
    c["comparisons"] = (_num(c["comparisons"]).fillna(1.0) if "comparisons" in c
                        else 1.0)
    for col in ("real_in_shadow", "shadow_in_real", "equivalent_agreement", "count_agreement",
                "max_abs_drift", "time", "unexplained_agreement"):
        c[col] = _num(c[col]) if col in c else float("nan")
    c["aligned"] = [bool(a) if isinstance(a, (bool, int, float)) and a == a else False
                    for a in (c["aligned"] if "aligned" in c else [False] * len(c))]
    c["why"] = [_why(d) for d in (c["disagreements"] if "disagreements" in c
                                  else [()] * len(c))]
    c["worst"] = c[["equivalent_agreement", "count_agreement"]].min(axis=1, skipna=True)
    c["anchor"] = [anchor(u) for u in c["pass_uuid"]]
    c["notes"] = ["; ".join(n) if isinstance(n, (list, tuple)) else (n or "")
                  for n in c["notes"]]
    return c.sort_values("time", kind="stable")[_AGREE_COLUMNS].reset_index(drop=True)


def _why(disagreements: Any) -> str:
    """A comparison's disagreeing submitters counted by class (core.disagreement):
    "2 pool changed, 1 unexplained"; empty when the counts agree or nothing was said."""
    if not isinstance(disagreements, (list, tuple)):
        return ""
    counts: dict[str, int] = {}
    for d in disagreements:
        if isinstance(d, Mapping):
            k = str(d.get("class") or "unexplained")
            counts[k] = counts.get(k, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def divergent_passes(agree: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """The `n` comparisons where real and shadow diverged most (lowest `worst`, below 1),
    most divergent first (passes only: a summarised hour keeps no details)."""
    a = agree[agree["worst"].notna() & (agree["worst"] < 1 - _EPS) & (agree["source"] != "hour")]
    return a.sort_values(["worst", "time"], kind="stable").head(n).reset_index(drop=True)


_DETAIL_COLUMNS = ["anchor", "pass_uuid", "kind", "name", "real", "shadow", "difference",
                   "real_share", "shadow_share", "real_limit", "shadow_limit",
                   "real_at_share_limit", "real_out_of_time", "why"]


def divergence_details(comparisons: pd.DataFrame, uuids: Sequence[str]) -> pd.DataFrame:
    """The per-submitter and per-group figures (real vs shadow matches, shares, limits)
    of the comparisons recorded by passes `uuids`, in that order."""
    by = {r["pass_uuid"]: r for r in comparisons.to_dict("records")}
    rows = []
    for u in uuids:
        r = by.get(u)
        if r is None:
            continue
        why = {d.get("submitter"): (d.get("class") or "") + (
            ": " + "; ".join(d.get("changes") or ()) if d.get("changes") else "")
            for d in (r.get("disagreements") or ()) if isinstance(d, Mapping)}
        for kind, table in (("submitter", r.get("per_submitter") or {}),
                            ("group", r.get("per_group") or {})):
            for name, v in sorted(table.items()):
                real = v.get("real", v.get("real_matches"))
                shadow = v.get("shadow", v.get("shadow_matches"))
                rows.append({"anchor": anchor(u), "pass_uuid": u, "kind": kind, "name": name,
                             "real": real, "shadow": shadow,
                             "difference": None if real is None or shadow is None
                             else shadow - real,
                             "real_share": v.get("real_share"),
                             "shadow_share": v.get("shadow_share"),
                             # (a limit HTCondor left without a number: unknown)
                             "real_limit": limit_figure(v.get("real_limit",
                                                              v.get("real_quota"))),
                             "shadow_limit": limit_figure(v.get("shadow_limit",
                                                                v.get("shadow_quota"))),
                             "real_at_share_limit": v.get("real_at_share_limit"),
                             "real_out_of_time": v.get("real_out_of_time"),
                             "why": why.get(name, "") if kind == "submitter" else ""})
    return pd.DataFrame.from_records(rows, columns=_DETAIL_COLUMNS)


