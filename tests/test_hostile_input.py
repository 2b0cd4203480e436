"""Hostile and broken snapshot input (issue 14): every case ends in a result or in one
line naming the file, the ad and the attribute (exit 2), never in a traceback, a crash,
a hang or a silently wrong number."""

import json
import os
import re

import pytest

from conftest import non_finite_numbers, writable_copy
from negotiator_ext import cli
from negotiator_ext.core.classads import lookup_int32
from negotiator_ext.limits import MAX_EXPR_OPERATORS

SCENARIO = "hgq_nested_hep_lep_surplus"


@pytest.fixture
def snap(tmp_path):
    return writable_copy(tmp_path, SCENARIO, "s")


def run(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def set_attr(path, attr, value, count=1):
    """Set the first `count` `attr = ...` lines of an ad file to `value`."""
    text = path.read_text()
    new, n = re.subn(rf"(?m)^{attr} = .*$", f"{attr} = {value}", text, count=count)
    assert n, attr
    path.write_text(new)


def error_line(capsys, *argv):
    rc, out, err = run(capsys, *argv)
    assert rc == 2, (out, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err.strip().removeprefix("negotiator-ext: error: ")


@pytest.mark.parametrize("value,why", [
    ('real("NaN")', 'not a number (NaN): real("NaN")'),
    ('real("INF")', 'not a finite number: real("INF")'),
    ('-real("INF")', 'not a finite number: -real("INF")'),
    ("1e39", "out of range (magnitude above 3.40282e+38): 9.999999999999999E+38"),
])
def test_non_finite_slot_resources_are_refused(snap, capsys, value, why):
    set_attr(snap / "slots.ads", "Cpus", value)
    msg = error_line(capsys, "negotiate", snap, "--json")
    assert msg == f"{snap}/slots.ads: ad 1 (slot1@busy001.refcondor.local): attribute Cpus: {why}"


@pytest.mark.parametrize("attr", ["Priority", "PriorityFactor", "WeightedResourcesUsed",
                                  "LastUpdate", "Ceiling", "Floor"])
@pytest.mark.parametrize("value", ['real("NaN")', 'real("INF")', '-real("INF")'])
def test_non_finite_accountant_numbers_are_refused(snap, capsys, attr, value):
    # -INF WeightedResourcesUsed used to hang the cycle; NaN Priority gave EUP nan
    set_attr(snap / "accounting.ads", attr, value)
    for command in ("negotiate", "userprio"):
        msg = error_line(capsys, command, snap)
        assert msg.startswith(f"{snap}/accounting.ads: ad 1 (group_chemistry): attribute {attr}: ")
        assert msg.endswith(value)


@pytest.mark.parametrize("attr,value,why", [
    ("Ceiling", "3.4e38", "out of range (a C int: -2147483648 to 2147483647): 3.400000000000000E+38"),
    ("LastUpdate", "-5", "not a time from 1970 to 9999 (-5 s): -5"),
    ("LastUpdate", "253402300800", "not a time from 1970 to 9999 (2.53402e+11 s): 253402300800"),
])
def test_accountant_numbers_out_of_their_range_are_refused(snap, capsys, attr, value, why):
    set_attr(snap / "accounting.ads", attr, value)
    msg = error_line(capsys, "userprio", snap)
    assert msg == f"{snap}/accounting.ads: ad 1 (group_chemistry): attribute {attr}: {why}"


def test_flt_max_group_sort_key_of_the_real_accountant_is_accepted(snap, capsys):
    # the real accountant writes GroupSortKey = 3.4E+38 for <none>: not refused
    set_attr(snap / "accounting.ads", "GroupSortKey", "3.4E+38", count=10)
    rc, out, err = run(capsys, "negotiate", snap, "--json")
    assert rc == 0 and len(json.loads(out)["matches"]) == 27


@pytest.mark.parametrize("attr,value,why", [
    ("IdleJobs", '"x"', 'not a number: "x"'),
    ("IdleJobs", 'real("NaN")', 'not a number (NaN): real("NaN")'),
    ("LastHeardFrom", '"x"', 'not a number: "x"'),
    ("LastHeardFrom", "1e300", "not a time from 1970 to 9999 (1e+300 s): 1.000000000000000E+300"),
    ("ScheddName", "{1,2}", "not a string: { 1, 2 }"),
])
def test_bad_submitter_ad_values_are_refused(snap, capsys, attr, value, why):
    set_attr(snap / "submitters.ads", attr, value)
    msg = error_line(capsys, "negotiate", snap)
    assert msg == (f"{snap}/submitters.ads: ad 1 (group_chemistry.curie@refcondor.local): "
                   f"attribute {attr}: {why}")


@pytest.mark.parametrize("edit,why", [
    ('"captured_at": Infinity', "not valid JSON: Infinity is not a JSON value"),
    ('"captured_at": NaN', "not valid JSON: NaN is not a JSON value"),
    ('"captured_at": 1e300', "captured_at: not a time from 1970 to 9999 (1e+300 s), not 1e+300"),
    ('"captured_at": "abc"', 'captured_at: expected a time in seconds since 1970, not "abc"'),
    ('"captured_at": true', "captured_at: expected a time in seconds since 1970, not true"),
    ('"captured_at": 1, "missing_schedds": 5', "missing_schedds: expected a list of strings, not 5"),
    ('"captured_at": 1, "partial": "yes"', 'partial: expected true or false, not "yes"'),
    ('"captured_at": 1, "errors": [1]',
     "errors: expected a list of names or an object of name: message, not [1]"),
])
def test_bad_meta_json_is_refused(snap, capsys, edit, why):
    meta = snap / "meta.json"
    meta.write_text(meta.read_text().replace('"captured_at": 1795265266', edit))
    for command in ("negotiate", "userprio"):
        assert error_line(capsys, command, snap) == f"{snap}/meta.json: {why}"


def test_deeply_nested_json_ad_file_is_refused(snap, capsys):
    (snap / "slots.ads").unlink()
    (snap / "slots.json").write_text("[" * 100000 + "]" * 100000)
    assert error_line(capsys, "negotiate", snap).startswith(f"{snap}/slots.json: ")


def test_bare_nan_in_a_json_ad_file_is_refused(snap, capsys):
    (snap / "submitters.ads").unlink()
    (snap / "submitters.json").write_text('[{"Name": "a@x", "IdleJobs": NaN}]')
    assert error_line(capsys, "negotiate", snap) == (
        f"{snap}/submitters.json: not valid JSON: NaN is not a JSON value")


def test_unicode_escapes_in_json_ads_read_as_their_characters(snap, capsys):
    # classad2's JSON reader turns \\u escapes of non-ASCII characters into wrong bytes
    # (a U+2028 into invalid UTF-8: a traceback); they are read as the characters
    (snap / "accounting.ads").unlink()
    doc = [{"Name": "caf\u00e9\u2028\U0001F600@x", "Priority": 500.0, "PriorityFactor": 1000.0,
            "IsAccountingGroup": False, "AccountingGroup": "caf\u00e9", "LastUpdate": 1795265253}]
    (snap / "accounting.json").write_text(json.dumps(doc))      # ensure_ascii: \\u escapes
    rc, out, err = run(capsys, "userprio", snap, "--json")
    assert rc == 0, err
    names = [r["Name"] for r in json.loads(out)["records"]]
    assert "caf\u00e9\u2028\U0001F600@x" in names


def test_lone_surrogate_escape_in_json_is_refused(snap, capsys):
    (snap / "submitters.ads").unlink()
    (snap / "submitters.json").write_text('[{"Name": "a\\ud800@x"}]')
    assert error_line(capsys, "negotiate", snap) == (
        f"{snap}/submitters.json: ad 1: \\ud800: half of a UTF-16 surrogate pair, no character")


def test_idle_job_without_ids_is_refused(snap, capsys):
    jobs = snap / "jobs.ads"
    jobs.write_text(re.sub(r"(?m)^(ClusterId|ProcId) = .*\n", "", jobs.read_text()))
    assert error_line(capsys, "negotiate", snap) == (
        f"{snap}/jobs.ads: line 1: ad 1 (vm#158.0#1795265255): attribute ClusterId: missing")


def test_idle_job_with_nan_proc_id_is_refused(snap, capsys):
    set_attr(snap / "jobs.ads", "ProcId", 'real("NaN")')
    assert error_line(capsys, "negotiate", snap) == (
        f'{snap}/jobs.ads: line 52: ad 1 (vm#158.0#1795265255): attribute ProcId: not a whole '
        'number from 0 up: real("NaN")')


@pytest.mark.parametrize("value,expected", [
    (float("nan"), 0), (float("inf"), 0), (-float("inf"), 0), (1e300, 0), (2.7, 2), (-2.7, -2),
    (2 ** 32 + 5, 5), (2 ** 31, -2 ** 31), (True, 1), ("x", None)])
def test_job_prio_reads_as_the_schedds_lookup_integer(value, expected):
    # LookupInteger into an int: (long long) cast, then the low 32 bits
    assert lookup_int32(value) == expected


def test_nan_job_prio_orders_the_job_as_prio_0(snap, capsys):
    jobs = snap / "jobs.ads"
    jobs.write_text(jobs.read_text().replace("ClusterId = ", 'JobPrio = real("NaN")\nClusterId = ', 1))
    rc, out, err = run(capsys, "negotiate", snap, "--json")
    assert rc == 0 and len(json.loads(out)["matches"]) == 27


def test_50000_term_requirements_gives_a_result(snap, capsys):
    # classad2 walks the chain recursively: SIGSEGV at ~35,000 terms on an 8 MiB stack
    req = " || ".join(f"(TARGET.Cpus == {i})" for i in range(50000))
    set_attr(snap / "jobs.ads", "Requirements", req)
    rc, out, err = run(capsys, "negotiate", snap, "--json")
    assert rc == 0, err
    assert json.loads(out)["matches"]


def test_expression_beyond_the_operator_limit_is_refused(snap, capsys):
    req = "||".join(["a"] * (MAX_EXPR_OPERATORS + 2))
    jobs = snap / "jobs.ads"
    text = jobs.read_text()
    line = text[:text.index("\nRequirements = ")].count("\n") + 2
    set_attr(jobs, "Requirements", req)
    assert error_line(capsys, "negotiate", snap) == (
        f"{snap}/jobs.ads: line {line}: ad 1: attribute Requirements: expression too large to "
        f"evaluate safely ({MAX_EXPR_OPERATORS + 1} operators; at most {MAX_EXPR_OPERATORS})")


def test_broken_repeat_of_an_attribute_is_reported_at_its_line(snap, capsys):
    jobs = snap / "jobs.ads"
    text = jobs.read_text()
    first_ad = text.split("\n\n")[0]
    n = first_ad.count("\n") + 1
    jobs.write_text(first_ad + '\nArgs = "unterminated\n\n' + text[len(first_ad):].lstrip("\n"))
    assert error_line(capsys, "negotiate", snap) == (
        f"{snap}/jobs.ads: line {n + 1}: ad 1 (vm#158.0#1795265255): attribute Args: "
        "cannot parse value '\"unterminated'")


def test_broken_line_mid_ad_is_named_when_its_attribute_comes_again(snap, capsys):
    jobs = snap / "jobs.ads"
    text = jobs.read_text()
    n = text[:text.index('\nArgs = "3600"')].count("\n") + 2
    jobs.write_text(text.replace('Args = "3600"', 'Args = ( 3600\nArgs = "3600"', 1))
    assert error_line(capsys, "negotiate", snap) == (
        f"{snap}/jobs.ads: line {n}: ad 1: attribute Args: cannot parse value '( 3600'")


def test_non_utf8_byte_in_config_is_refused_at_its_line(snap, capsys):
    # was: every group silently dropped (37 matches instead of 27)
    cfg = snap / "config"
    data = cfg.read_bytes().replace(b"GROUP_NAMES = group_physics,", b"GROUP_NAMES = gr\xffoup_physics,")
    cfg.write_bytes(data)
    n = data[:data.index(b"\xff")].count(b"\n") + 1
    assert error_line(capsys, "negotiate", snap) == f"{cfg}: line {n}: byte 0xff is not UTF-8 text"


@pytest.mark.parametrize("value", ["0", "-5"])
def test_priority_halflife_not_positive_is_refused(snap, capsys, value):
    # param_double's range for it starts at 1e-05; the negotiator stops below it
    with open(snap / "config", "a") as f:
        f.write(f"\nPRIORITY_HALFLIFE = {value}\n")
    assert error_line(capsys, "userprio", snap) == (
        f"{snap}/config: PRIORITY_HALFLIFE = {value}: too low (at least 1e-05 s; "
        "HTCondor's negotiator refuses to start)")


def test_no_non_finite_number_in_json_output(snap, capsys):
    rc, out, err = run(capsys, "negotiate", snap, "--json")
    assert rc == 0
    json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert non_finite_numbers(json.loads(out)) == []



@pytest.mark.parametrize("line,why", [
    ("DEFAULT_PRIO_FACTOR = inf", "DEFAULT_PRIO_FACTOR = inf: not a finite number"),
    ("DEFAULT_PRIO_FACTOR = 1e300",
     "DEFAULT_PRIO_FACTOR = 1e300: out of range (magnitude above 1e+100, HTCondor's largest default)"),
])
def test_infinite_or_absurd_number_knobs_are_refused(snap, capsys, line, why):
    # found by the fuzzer: HTCondor takes inf, and every priority became infinite
    with open(snap / "config", "a") as f:
        f.write(f"\n{line}\n")
    assert error_line(capsys, "negotiate", snap, "--json") == f"{snap}/config: {why}"


@pytest.mark.parametrize("char,kept", [("\x85", True), ("\u2028", True), ("\xa0", True),
                                       ("\r", False), ("\x0b", False), ("\t", False)])
def test_submitter_names_are_refused_only_for_c_white_space(snap, char, kept):
    # IsValidSubmitterName uses C isspace (C locale): U+0085 and friends are valid bytes
    from negotiator_ext.pool import load_pool
    subs = snap / "submitters.ads"
    name = f"group_chemistry.cu{char}rie@refcondor.local"
    subs.write_text(subs.read_text().replace("group_chemistry.curie@refcondor.local", name),
                    encoding="utf-8")
    names = [d["Name"] for d in load_pool(snap).submitter_ads()]
    assert (name in names) is kept


def test_capture_time_before_the_accountants_last_update_is_warned(snap, capsys):
    meta = snap / "meta.json"
    meta.write_text(meta.read_text().replace('"captured_at": 1795265266', '"captured_at": 1795265250'))
    rc, out, err = run(capsys, "negotiate", snap, "--json")
    assert rc == 0
    assert (f"negotiator-ext: warning: {snap}/accounting.ads: the capture time 1795265250 is "
            "before the accountant's LastUpdate 1795265253 (a cycle began during the "
            "capture?): the accountant takes no time step\n") in err


@pytest.mark.parametrize("value,expected", [
    (0, 0), (158, 158), (3.0, 3), (2.5, None), (-1, None), (float("nan"), None),
    (float("inf"), None), ("1", None), (True, None), (None, None)])
def test_a_job_id_is_a_whole_number_from_0_up(value, expected):
    # one rule for the cycle (files) and the capture (a schedd's answer)
    from negotiator_ext.core.job_queue import id_number
    assert id_number(value) == expected


# ---- job files: ids, the same job twice, files that cannot be read (issue 33) --------------

def _ads(path):
    return path.read_text().strip("\n").split("\n\n")


def _write_ads(path, ads):
    path.write_text("\n\n".join(ads) + "\n\n")


def _line_of(path, ad_index, attr=None):
    """The line of ad `ad_index` (from 1), or of its attribute `attr`, in an ad file with
    one blank line between ads."""
    ads = _ads(path)
    first = 1 + sum(a.count("\n") + 2 for a in ads[:ad_index - 1])
    if attr is None:
        return first
    lines = ads[ad_index - 1].split("\n")
    return first + next(k for k, ln in enumerate(lines) if ln.startswith(f"{attr} = "))


@pytest.mark.parametrize("command", [["userprio"], ["negotiate", "--json"], ["explain", "158.1"]])
@pytest.mark.parametrize("attr,value,why", [
    ("ClusterId", None, "missing"),
    ("ProcId", None, "missing"),
    ("ClusterId", '"abc"', 'not a whole number from 0 up: "abc"'),
    ("ProcId", "-1", "not a whole number from 0 up: -1"),
    ("ProcId", "2.5", "not a whole number from 0 up: 2.5"),
    ("ClusterId", "undefined", "not a whole number from 0 up: undefined"),
])
def test_a_job_without_whole_ids_is_refused_by_every_command(snap, capsys, command, attr,
                                                             value, why):
    # was: userprio said nothing; explain answered "no job 158.0 in the snapshot"
    jobs = snap / "jobs.ads"
    ads = _ads(jobs)
    # a running job (the cycle offers only idle ones): refused all the same
    ads[1] = ads[1].replace("JobStatus = 1", "JobStatus = 2")
    line = _line_of(jobs, 2, attr if value is not None else None)
    ads[1] = re.sub(rf"(?m)^{attr} = .*(\n|$)", "" if value is None else f"{attr} = {value}\\1",
                    ads[1])
    _write_ads(jobs, ads)
    msg = error_line(capsys, *command[:1], snap, *command[1:])
    assert msg == f"{jobs}: line {line}: ad 2 (vm#158.1#1795265255): attribute {attr}: {why}"


def test_a_job_file_in_json_without_ids_is_named_without_a_line(snap, capsys):
    from negotiator_ext.adapters.adfiles import read_ads
    ads = read_ads(snap / "jobs.ads")
    del ads[2]["ProcId"]
    (snap / "jobs.ads").unlink()
    (snap / "jobs.json").write_text("[" + ",\n".join(ad.printJson() for ad in ads) + "]")
    assert error_line(capsys, "userprio", snap) == (
        f"{snap}/jobs.json: ad 3 (vm#158.2#1795265255): attribute ProcId: missing")


@pytest.mark.parametrize("argv", [["explain", "158.0"], ["explain", "158.0", "--schedd", "vm"],
                                  ["userprio"], ["negotiate"]])
def test_a_job_given_twice_at_one_schedd_is_a_duplicate_naming_both_ads(snap, capsys, argv):
    # was (explain): "is at several schedds (vm, vm): name one with --schedd", which no
    # --schedd could fix
    jobs = snap / "jobs.ads"
    ads = _ads(jobs)
    ads.insert(3, ads[0])
    _write_ads(jobs, ads)
    msg = error_line(capsys, argv[0], snap, *argv[1:])
    assert msg == (f"{jobs}: line {_line_of(jobs, 4)}: ad 4 (vm#158.0#1795265255): duplicate "
                   "job id 158.0 at schedd vm: ad 1 (line 1) has the same ClusterId and "
                   "ProcId (a schedd gives each job its own)")


def test_a_job_given_twice_in_two_files_of_one_schedd_names_both_files(snap, capsys):
    jobs = snap / "jobs.ads"
    other = snap / "jobs-more.ads"
    _write_ads(other, [_ads(jobs)[1]])
    assert error_line(capsys, "explain", snap, "158.1") == (
        f"{jobs}: line {_line_of(jobs, 2)}: ad 2 (vm#158.1#1795265255): duplicate job id "
        f"158.1 at schedd vm: {other}'s ad 1 (line 1) has the same ClusterId and ProcId (a "
        "schedd gives each job its own)")


def test_one_job_id_at_two_schedds_is_two_jobs(snap, capsys):
    # condor_q -global: one file, several schedds told apart by GlobalJobId
    jobs = snap / "jobs.ads"
    ads = _ads(jobs)
    ads.append(ads[0].replace('GlobalJobId = "vm#', 'GlobalJobId = "other#'))
    _write_ads(jobs, ads)
    rc, _, err = run(capsys, "explain", snap, "158.0")
    assert rc == 2 and err.strip().endswith(
        "job 158.0 is at several schedds (other, vm): name one with --schedd")
    rc, out, err = run(capsys, "explain", snap, "158.0", "--schedd", "vm", "--json")
    assert rc == 0, err
    assert json.loads(out)["job"]["id"] == "158.0"


def _symlink_loop(p):
    p.unlink()
    p.symlink_to(p.name)


def _directory(p):
    p.unlink()
    p.mkdir()


def _dangling(p):
    p.unlink()
    p.symlink_to("nowhere")


def _fifo(p):
    p.unlink()
    os.mkfifo(p)


@pytest.mark.parametrize("name", ["jobs.ads", "accounting.ads", "config", "meta.json"])
@pytest.mark.parametrize("make,why", [
    (_symlink_loop, "cannot read: Too many levels of symbolic links"),
    (_directory, "cannot read: a directory, not a file"),
    (_dangling, "cannot read: a symbolic link to nothing"),
    (_fifo, "cannot read: not a regular file"),
])
def test_a_snapshot_file_that_cannot_be_read_is_named(snap, capsys, name, make, why):
    # was: a jobs.ads in a symlink loop read as no jobs (the cycle: 0 matches), an
    # accounting.ads as no accountant, a config as HTCondor's defaults
    make(snap / name)
    for argv in (["negotiate", snap, "--json"], ["userprio", snap]):
        assert error_line(capsys, *argv) == f"{snap}/{name}: {why}"


def test_a_job_file_that_cannot_be_opened_is_named(snap, capsys, monkeypatch):
    # permission denied (faked: the tests may run as root, who reads everything)
    from negotiator_ext.adapters import adfiles
    real = adfiles._open

    def refusing(p):
        if p.name == "jobs.ads":
            raise PermissionError(13, "Permission denied", str(p))
        return real(p)
    monkeypatch.setattr(adfiles, "_open", refusing)
    assert error_line(capsys, "negotiate", snap) == f"{snap}/jobs.ads: cannot read: Permission denied"
    if os.geteuid() != 0:
        monkeypatch.setattr(adfiles, "_open", real)
        (snap / "jobs.ads").chmod(0)
        assert error_line(capsys, "userprio", snap) == (
            f"{snap}/jobs.ads: cannot read: Permission denied")
