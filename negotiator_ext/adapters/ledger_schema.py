"""The ledger's schema: the ordered `MIGRATIONS` (each step never edited once released),
`SCHEMA_VERSION`, the tables `export` writes, the PostgreSQL advisory lock keys, and which
`PassRecord` fields are the `passes` header row and which are child tables. See
adapters/ledger.py."""

from __future__ import annotations

import dataclasses

from ..core.records import PassRecord


# Ordered (version, statements). A step is never edited once released: a change of the
# schema is a new step. `{id}` is the auto-increment primary key of the dialect.
MIGRATIONS: list[tuple[int, tuple[str, ...]]] = [
    (1, (
        "CREATE TABLE ledger_meta (key TEXT PRIMARY KEY, value TEXT)",
        """CREATE TABLE passes (
            id {id},
            uuid TEXT NOT NULL UNIQUE,
            pool TEXT NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            finished_at DOUBLE PRECISION,
            snapshot_time BIGINT,
            status TEXT NOT NULL,
            reason TEXT,
            real_cycle_time BIGINT,
            real_accountant_time BIGINT,
            shadow_duration DOUBLE PRECISION,
            capture_duration DOUBLE PRECISION,
            shadow_timings TEXT,
            snapshot_dir TEXT,
            warnings TEXT,
            n_real_cycles BIGINT NOT NULL DEFAULT 0,
            n_shadow_matches BIGINT NOT NULL DEFAULT 0,
            n_real_matches BIGINT NOT NULL DEFAULT 0,
            n_submitters BIGINT NOT NULL DEFAULT 0,
            n_groups BIGINT NOT NULL DEFAULT 0,
            n_comparisons BIGINT NOT NULL DEFAULT 0)""",
        """CREATE TABLE real_cycles (
            id {id},
            pool TEXT NOT NULL,
            "time" BIGINT NOT NULL,
            first_pass TEXT NOT NULL,
            "end" BIGINT,
            duration DOUBLE PRECISION,
            phase_durations TEXT,
            matches BIGINT,
            rejections BIGINT,
            active_submitters BIGINT,
            idle_jobs BIGINT,
            candidate_slots BIGINT,
            submitters_failed TEXT,
            submitters_out_of_time TEXT,
            submitters_share_limit TEXT,
            schedds_out_of_time TEXT,
            UNIQUE (pool, "time"))""",
        """CREATE TABLE shadow_matches (
            id {id},
            pass_uuid TEXT NOT NULL,
            job TEXT NOT NULL,
            submitter TEXT NOT NULL,
            slot TEXT NOT NULL,
            preempting TEXT,
            "time" BIGINT,
            "group" TEXT)""",
        """CREATE TABLE real_matches (
            id {id},
            pass_uuid TEXT NOT NULL,
            job TEXT NOT NULL,
            submitter TEXT NOT NULL,
            slot TEXT NOT NULL,
            preempting TEXT,
            "time" BIGINT,
            "group" TEXT)""",
        """CREATE TABLE submitters (
            id {id},
            pass_uuid TEXT NOT NULL,
            name TEXT NOT NULL,
            "group" TEXT,
            is_group INTEGER NOT NULL,
            factor DOUBLE PRECISION,
            policy_factor DOUBLE PRECISION,
            factor_lease_expires BIGINT,
            floor BIGINT,
            floor_lease_expires BIGINT,
            ceiling BIGINT,
            ceiling_lease_expires BIGINT,
            real_rup DOUBLE PRECISION,
            real_eup DOUBLE PRECISION,
            real_usage DOUBLE PRECISION,
            resources_used DOUBLE PRECISION,
            hier_usage DOUBLE PRECISION,
            real_share DOUBLE PRECISION,
            real_limit DOUBLE PRECISION,
            last_usage_time BIGINT,
            begin_usage_time BIGINT,
            claimed_weight DOUBLE PRECISION,
            idle_jobs BIGINT,
            running_jobs BIGINT,
            shadow_eup DOUBLE PRECISION,
            shadow_share DOUBLE PRECISION,
            shadow_limit DOUBLE PRECISION,
            shadow_matches BIGINT,
            shadow_match_weight DOUBLE PRECISION,
            real_matches BIGINT,
            predicted_rup DOUBLE PRECISION,
            drift DOUBLE PRECISION)""",
        """CREATE TABLE "groups" (
            id {id},
            pass_uuid TEXT NOT NULL,
            name TEXT NOT NULL,
            real_quota DOUBLE PRECISION,
            config_quota DOUBLE PRECISION,
            real_usage DOUBLE PRECISION,
            real_requested DOUBLE PRECISION,
            shadow_quota DOUBLE PRECISION,
            shadow_allocated DOUBLE PRECISION,
            shadow_usage_after DOUBLE PRECISION,
            shadow_matches BIGINT,
            real_matches BIGINT)""",
        """CREATE TABLE comparisons (
            id {id},
            pass_uuid TEXT NOT NULL UNIQUE,
            shadow_pass TEXT,
            real_cycle_time BIGINT,
            real_cycles_between BIGINT,
            real_matches BIGINT,
            shadow_matches BIGINT,
            agreed BIGINT,
            real_in_shadow DOUBLE PRECISION,
            shadow_in_real DOUBLE PRECISION,
            count_agreement DOUBLE PRECISION,
            source TEXT,
            per_submitter TEXT,
            per_group TEXT,
            max_abs_drift DOUBLE PRECISION,
            real_duration DOUBLE PRECISION,
            notes TEXT)""",
        "CREATE INDEX real_cycles_first_pass ON real_cycles (first_pass)",
        "CREATE INDEX shadow_matches_pass ON shadow_matches (pass_uuid)",
        "CREATE INDEX real_matches_pass ON real_matches (pass_uuid)",
        "CREATE INDEX submitters_pass ON submitters (pass_uuid)",
        'CREATE INDEX groups_pass ON "groups" (pass_uuid)',
    )),
    (2, (
        # the audit trail of applied recommendations, and the index `window` and
        # `prune` select passes by
        """CREATE TABLE adjustments (
            id {id},
            "key" TEXT NOT NULL,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            value DOUBLE PRECISION,
            applied_at BIGINT NOT NULL,
            lease_expires BIGINT,
            command TEXT,
            method TEXT,
            outcome TEXT NOT NULL)""",
        'CREATE INDEX adjustments_key ON adjustments ("key", applied_at)',
        "CREATE INDEX passes_pool_started ON passes (pool, started_at)",
    )),
    # 3: whether a pass's own cycle may be compared by the next pass (PassRecord.comparable);
    # passes recorded before it are taken as comparable when they were complete
    (3, (
        "ALTER TABLE passes ADD COLUMN comparable INTEGER",
        "UPDATE passes SET comparable = CASE WHEN status = 'complete' THEN 1 ELSE 0 END",
    )),
    # 4: agreement up to interchangeable slots (Comparison.agreed_equivalent), and the
    # slot classes of the newest comparable passes not compared yet (PassRecord.slot_classes)
    (4, (
        "ALTER TABLE comparisons ADD COLUMN agreed_equivalent BIGINT",
        "ALTER TABLE comparisons ADD COLUMN equivalent_agreement DOUBLE PRECISION",
        """CREATE TABLE slot_classes (
            pass_uuid TEXT PRIMARY KEY,
            pool TEXT NOT NULL,
            classes TEXT NOT NULL)""",
        "CREATE INDEX comparisons_shadow_pass ON comparisons (shadow_pass)",
    )),
    # 5: our SubmitterLimit as the real accountant publishes its own
    (5, (
        "ALTER TABLE submitters ADD COLUMN shadow_submitter_limit DOUBLE PRECISION",
    )),
    # 6: what the audit needs: the pool's size per pass, each match's queue wait
    (6, (
        "ALTER TABLE passes ADD COLUMN pool_weight DOUBLE PRECISION",
        "ALTER TABLE shadow_matches ADD COLUMN wait DOUBLE PRECISION",
        "ALTER TABLE real_matches ADD COLUMN wait DOUBLE PRECISION",
    )),
    # 7: where a pass's time went (PassRecord.pass_timings)
    (7, (
        "ALTER TABLE passes ADD COLUMN pass_timings TEXT",
    )),
    # 8: where the real cycle's time limits would stop it (PassRecord.time_limits)
    (8, (
        "ALTER TABLE passes ADD COLUMN time_limits TEXT",
        "ALTER TABLE comparisons ADD COLUMN time_limits TEXT",
    )),
    # 9: hourly summaries of the passes older than the detail window (`summarise`): one
    # `hours` row per (pool, hour) with its submitters and groups (the columns of
    # SubmitterObs and GroupObs, aggregated as _SUBMITTER_AGG and _GROUP_AGG say, and in
    # how many of the hour's complete passes each was recorded)
    (9, (
        """CREATE TABLE hours (
            id {id},
            pool TEXT NOT NULL,
            hour BIGINT NOT NULL,
            passes BIGINT NOT NULL,
            complete BIGINT NOT NULL,
            partial BIGINT NOT NULL,
            failed BIGINT NOT NULL,
            seconds DOUBLE PRECISION NOT NULL,
            first_started DOUBLE PRECISION,
            last_started DOUBLE PRECISION,
            pool_weight DOUBLE PRECISION,
            shadow_duration DOUBLE PRECISION,
            capture_duration DOUBLE PRECISION,
            shadow_matches BIGINT NOT NULL DEFAULT 0,
            real_matches BIGINT NOT NULL DEFAULT 0,
            newest_real_cycle BIGINT,
            reasons TEXT,
            real_cycles TEXT,
            comparisons TEXT,
            n_submitters BIGINT NOT NULL DEFAULT 0,
            n_groups BIGINT NOT NULL DEFAULT 0,
            UNIQUE (pool, hour))""",
        """CREATE TABLE hour_submitters (
            id {id},
            hour_id BIGINT NOT NULL,
            passes BIGINT NOT NULL,
            name TEXT NOT NULL,
            "group" TEXT,
            is_group INTEGER NOT NULL,
            factor DOUBLE PRECISION,
            policy_factor DOUBLE PRECISION,
            factor_lease_expires BIGINT,
            floor BIGINT,
            floor_lease_expires BIGINT,
            ceiling BIGINT,
            ceiling_lease_expires BIGINT,
            real_rup DOUBLE PRECISION,
            real_eup DOUBLE PRECISION,
            real_usage DOUBLE PRECISION,
            resources_used DOUBLE PRECISION,
            hier_usage DOUBLE PRECISION,
            real_share DOUBLE PRECISION,
            real_limit DOUBLE PRECISION,
            last_usage_time BIGINT,
            begin_usage_time BIGINT,
            claimed_weight DOUBLE PRECISION,
            idle_jobs DOUBLE PRECISION,
            running_jobs DOUBLE PRECISION,
            shadow_eup DOUBLE PRECISION,
            shadow_share DOUBLE PRECISION,
            shadow_limit DOUBLE PRECISION,
            shadow_matches BIGINT,
            shadow_match_weight DOUBLE PRECISION,
            real_matches BIGINT,
            predicted_rup DOUBLE PRECISION,
            shadow_submitter_limit DOUBLE PRECISION,
            drift DOUBLE PRECISION)""",
        """CREATE TABLE hour_groups (
            id {id},
            hour_id BIGINT NOT NULL,
            passes BIGINT NOT NULL,
            name TEXT NOT NULL,
            real_quota DOUBLE PRECISION,
            config_quota DOUBLE PRECISION,
            real_usage DOUBLE PRECISION,
            real_requested DOUBLE PRECISION,
            shadow_quota DOUBLE PRECISION,
            shadow_allocated DOUBLE PRECISION,
            shadow_usage_after DOUBLE PRECISION,
            shadow_matches BIGINT,
            real_matches BIGINT)""",
        "CREATE INDEX hour_submitters_hour ON hour_submitters (hour_id)",
        "CREATE INDEX hour_groups_hour ON hour_groups (hour_id)",
    )),
    # 10: why a comparison disagrees (core.disagreement) and whether the compared capture
    # was aligned with the real cycle's start by the NegotiatorLog (issue 32)
    (10, (
        "ALTER TABLE passes ADD COLUMN aligned_cycle BIGINT",
        "ALTER TABLE comparisons ADD COLUMN unexplained_agreement DOUBLE PRECISION",
        "ALTER TABLE comparisons ADD COLUMN disagreements TEXT",
        "ALTER TABLE comparisons ADD COLUMN changes TEXT",
        "ALTER TABLE comparisons ADD COLUMN aligned INTEGER",
        # the digests of the newest comparable passes' snapshots (adapters/ledger_digests.py)
        """CREATE TABLE pool_digests (
            pass_uuid TEXT PRIMARY KEY,
            pool TEXT NOT NULL,
            digest TEXT NOT NULL)""",
    )),
    # 11: when the real accountant updated the priorities (the NegotiatorLog's phase 2)
    # and what re-predicting the unexplained differences at that time did (issue 32)
    (11, (
        "ALTER TABLE real_cycles ADD COLUMN accounting_time BIGINT",
        "ALTER TABLE comparisons ADD COLUMN repredicted TEXT",
    )),
    # 12: the turns the NegotiatorLog names as skipped by a time limit (issue 34's 1M
    # recording: a submitter served in the first spin, its schedd out of time before its
    # second)
    (12, (
        "ALTER TABLE real_cycles ADD COLUMN submitters_skipped TEXT",
    )),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]

# the tables `export` writes (all but ledger_meta), in dependency order
TABLES = ("passes", "real_cycles", "shadow_matches", "real_matches", "submitters", "groups",
          "comparisons", "adjustments", "hours", "hour_submitters", "hour_groups")

EXPORT_FORMATS = ("csv", "jsonl", "parquet")

_PG_MIGRATION_LOCK = 0x6E6567_6F7478  # pg_advisory_xact_lock key: one migrator at a time
_PG_COMPARISON_LOCK = 0x6E6567_636D70  # and one writer of a comparison at a time
_PG_SUMMARY_LOCK = 0x6E6567_68726C    # and one summariser of an hour at a time

# PassRecord fields stored in their own tables, not in the header row
_PASS_CHILDREN = ("real_cycles", "shadow_matches", "real_matches", "submitters", "groups",
                  "comparison", "slot_classes", "digest")
_PASS_HEADER = tuple(f.name for f in dataclasses.fields(PassRecord)
                     if f.name not in _PASS_CHILDREN)
_COUNTS = ("n_real_cycles", "n_shadow_matches", "n_real_matches", "n_submitters", "n_groups",
           "n_comparisons")
# child table -> (column naming the pass, header count column)
_CHILD_TABLES = {"real_cycles": ("first_pass", "n_real_cycles"),
                 "shadow_matches": ("pass_uuid", "n_shadow_matches"),
                 "real_matches": ("pass_uuid", "n_real_matches"),
                 "submitters": ("pass_uuid", "n_submitters"),
                 "groups": ("pass_uuid", "n_groups"),
                 "comparisons": ("pass_uuid", "n_comparisons")}
