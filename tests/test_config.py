"""HTCondor configuration through htcondor2.param (reference 0.1)."""

import pytest

from conftest import FIXTURES
from negotiator_ext.adapters.condor_config import load_config
from negotiator_ext.errors import InputError


def write(tmp_path, text, name="config"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_fixture_config_and_htcondor_defaults():
    c = load_config(FIXTURES / "hgq_nested_hep_lep_surplus" / "config")
    assert [g.name for g in c.groups] == ["group_physics", "group_physics.hep", "group_physics.lep",
                                         "group_chemistry"]
    by = {g.name: g for g in c.groups}
    assert by["group_physics.hep"].static_quota == 15.0 and by["group_physics.hep"].accept_surplus
    assert not by["group_physics"].accept_surplus
    # HTCondor's own defaults, from its param table
    assert c.priority_halflife == 86400.0 and c.default_prio_factor == 1000.0
    assert c.nice_user_prio_factor == 1e10 and c.remote_prio_factor == 1e7
    assert c.allow_quota_oversubscription is True     # the table's default, not the code's
    assert c.preemption_requirements == "False"
    assert c.slot_weight == "Cpus" and c.use_slot_weights is True
    assert "RemoteOwner =?= UNDEFINED" in c.pre_job_rank
    assert c.group_quota_max_allocation_rounds == 3 and c.group_quota_round_robin_rate == 1e100
    assert c.strict_enforce_quota is True and c.concurrency_limit_default == 2308032.0


def test_macro_expansion_subsystem_override_and_our_prefix(tmp_path):
    p = write(tmp_path, "BASE = 5\nDEFAULT_PRIO_FACTOR = $(BASE) * 2\n"
                        "NEGOTIATOR.PRIORITY_HALFLIFE = 3600\nPRIORITY_HALFLIFE = 7\n"
                        "NEGOTIATOR_EXT_STATE_DIR = /var/lib/negotiator-ext\n"
                        "GROUP_NAMES = Group_A, group_a.x\nGROUP_QUOTA_DYNAMIC_group_a = 0.5\n"
                        "GROUP_QUOTA_group_A.x = 4\nGROUP_PRIO_FACTOR_group_a = 3\n")
    c = load_config(p)
    assert c.default_prio_factor == 10.0
    assert c.priority_halflife == 3600.0          # NEGOTIATOR.<knob> wins for the negotiator
    assert c.ext["STATE_DIR"] == "/var/lib/negotiator-ext"
    by = {g.name: g for g in c.groups}
    assert by["Group_A"].dynamic_quota == 0.5 and by["Group_A"].static_quota is None
    assert by["group_a.x"].static_quota == 4.0   # knob names are case-insensitive
    assert c.group_prio_factor("group_a") == 3.0 and c.group_prio_factor("GROUP_A") == 3.0


def test_concurrency_limit_maxima(tmp_path):
    c = load_config(write(tmp_path, "FOO_LIMIT = 3\nCONCURRENCY_LIMIT_DEFAULT_LIC = 2\n"
                                    "CONCURRENCY_LIMIT_DEFAULT = 100\nlic.special_LIMIT = 7\n"))
    assert c.concurrency_limit_max("foo") == 3.0
    assert c.concurrency_limit_max("FOO") == 3.0
    assert c.concurrency_limit_max("lic.any") == 2.0
    assert c.concurrency_limit_max("lic.special") == 7.0
    assert c.concurrency_limit_max("other") == 100.0


def test_environment_overrides_do_not_leak_into_a_snapshot_config(tmp_path, monkeypatch):
    monkeypatch.setenv("_CONDOR_DEFAULT_PRIO_FACTOR", "42")
    assert load_config(write(tmp_path, "\n")).default_prio_factor == 1000.0


def test_no_config_means_htcondor_defaults():
    c = load_config(None)
    assert c.source == "<HTCondor defaults>" and c.groups == () and c.default_prio_factor == 1000.0


@pytest.mark.parametrize("text,expected", [
    ("A = 1\nthis is not valid\n", "line 2: not valid HTCondor configuration: 'this is not valid'"),
    ("PRIORITY_HALFLIFE = abc\n", "PRIORITY_HALFLIFE = abc: not a number"),
    ("NEGOTIATOR_USE_SLOT_WEIGHTS = maybe\n", "NEGOTIATOR_USE_SLOT_WEIGHTS = maybe: not a boolean"),
    ("GROUP_NAMES = g\nGROUP_QUOTA_g = -5\n", "GROUP_QUOTA_g = -5: a group quota cannot be negative"),
    ("GROUP_NAMES = g\nGROUP_QUOTA_g = lots\n", "GROUP_QUOTA_g = lots: not a number"),
    ("GROUP_NAMES = g\nGROUP_QUOTA_g = 3e9\n", "GROUP_QUOTA_g = 3e+09: too high (at most 2.14748e+09)"),
    ("GROUP_NAMES = g\nGROUP_QUOTA_DYNAMIC_g = 1.5\n", "GROUP_QUOTA_DYNAMIC_g = 1.5: too high (at most 1)"),
    ("PREEMPTION_REQUIREMENTS = (a &&\n", "PREEMPTION_REQUIREMENTS = (a &&: not a valid ClassAd expression"),
])
def test_bad_config_is_named(tmp_path, text, expected):
    p = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        load_config(p)
    assert e.value.one_line() == f"{p}: {expected}"


def test_missing_config_file(tmp_path):
    with pytest.raises(InputError, match="config file not found"):
        load_config(tmp_path / "nope")


def test_a_knob_without_value_or_table_default_takes_the_dataclass_default():
    from negotiator_ext.core.config import NegotiatorConfig
    c = NegotiatorConfig.from_params({"GROUP_QUOTA_MAX_ALLOCATION_ROUNDS": None, "SLOT_WEIGHT": " "},
                                     source="x")
    assert c == NegotiatorConfig(source="x")
    assert c.group_sort_expr.startswith('ifThenElse(AccountingGroup=?="<none>"')


def test_ext_knobs_are_ours_only_with_the_prefix_dropped():
    from negotiator_ext.core.config import NegotiatorConfig, ext_knobs
    params = {"negotiator_ext_Pool": "cm:9618", "NEGOTIATOR_EXT_SNAPSHOT_TIMEOUT": 30.5,
              "NEGOTIATOR_EXT_UNSET": None, "NEGOTIATOR_INTERVAL": 60}
    assert ext_knobs(params) == {"POOL": "cm:9618", "SNAPSHOT_TIMEOUT": "30.5"}
    assert dict(NegotiatorConfig.from_params(params).ext) == ext_knobs(params)


def test_group_knobs_fall_back_to_the_global_ones(tmp_path):
    c = load_config(write(tmp_path, "GROUP_NAMES = a, b\nGROUP_ACCEPT_SURPLUS = True\n"
                                    "GROUP_ACCEPT_SURPLUS_b = False\nGROUP_AUTOREGROUP_a = True\n"))
    by = {g.name: g for g in c.groups}
    assert by["a"].accept_surplus and by["a"].autoregroup
    assert not by["b"].accept_surplus and not by["b"].autoregroup
    assert by["a"].static_quota is None and by["a"].dynamic_quota is None


@pytest.mark.parametrize("line, attr, value", [
    ("PRIORITY_HALFLIFE = 0x10", "priority_halflife", 16.0),     # strtod reads hex
    ("PRIORITY_HALFLIFE = 2 * 3600", "priority_halflife", 7200.0),  # else an expression
    ("NEGOTIATOR_INTERVAL = 120 ", "negotiator_interval", 120),
    ("NEGOTIATOR_INTERVAL = 60 * 2", "negotiator_interval", 120),
])
def test_numbers_are_read_as_param_double_and_param_integer_read_them(tmp_path, line, attr, value):
    f = tmp_path / "config"
    f.write_text(line + "\n")
    assert getattr(load_config(f), attr) == value


def test_python_only_number_syntax_is_refused(tmp_path):
    f = tmp_path / "config"
    f.write_text("DEFAULT_PRIO_FACTOR = 1_000\n")
    with pytest.raises(InputError, match="DEFAULT_PRIO_FACTOR = 1_000: not a number"):
        load_config(f)


def test_our_knobs_are_read_one_way():
    """Every NEGOTIATOR_EXT_* number and boolean goes through ext_number / ext_bool."""
    from negotiator_ext.core.config import ext_bool, ext_number
    knobs = {"A": "90.5", "B": "abc", "C": "0", "D": "-1", "E": "inf", "T": "t", "N": "No"}
    assert ext_number(knobs, "A", 1) == 90.5
    assert ext_number(knobs, "A", 1, kind=int) == 90
    assert ext_number(knobs, "MISSING", 7) == 7
    for name, kw, msg in (("B", {}, "not a number: abc"), ("E", {}, "not a finite number"),
                          ("D", {"minimum": 0}, "must be at least 0"),
                          ("C", {"positive": True}, "must be more than 0")):
        with pytest.raises(InputError, match=msg) as e:
            ext_number(knobs, name, 1, **kw)
        assert e.value.source == f"NEGOTIATOR_EXT_{name}"
    assert (ext_bool(knobs, "T", False), ext_bool(knobs, "N", True)) == (True, False)
    assert ext_bool(knobs, "MISSING", True) is True
    with pytest.raises(InputError, match="NEGOTIATOR_EXT_A: not a boolean"):
        ext_bool(knobs, "A", True)
