"""The JSON documents commands print (views/jsondoc.py): the same value as json.dumps
gives, one row per line."""

from __future__ import annotations

import io
import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from negotiator_ext.views import jsondoc
from negotiator_ext.views.jsondoc import document, print_document

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                     st.floats(allow_nan=False))
_values = st.recursive(_scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=6), kids, max_size=4),
    st.dictionaries(st.integers(-3, 3), kids, max_size=2)), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(_values, st.booleans())
def test_the_document_is_the_value_json_dumps_gives(value, sort_keys):
    text = document(value, sort_keys=sort_keys)
    assert json.loads(text) == json.loads(json.dumps(value, sort_keys=sort_keys))
    out = io.StringIO()
    print_document(value, out, sort_keys=sort_keys)
    assert out.getvalue() == text + "\n"


def test_a_long_list_is_written_in_pieces_as_the_same_text(monkeypatch):
    monkeypatch.setattr(jsondoc, "_ROWS_AT_ONCE", 3)
    doc = {"matches": [{"job": f"1.{i}"} for i in range(10)], "rows": [[1], [2], [3]],
           "one": [7]}
    writes = []

    class Stream(io.StringIO):
        def write(self, text):
            writes.append(text)
            return super().write(text)
    out = Stream()
    print_document(doc, out)
    assert out.getvalue() == document(doc) + "\n"
    rows = [w for w in writes if '"job"' in w]
    assert [w.count('"job"') for w in rows] == [3, 3, 3, 1]     # never the whole list
    lines = out.getvalue().splitlines()
    assert lines[1:12] == ['  "matches": ['] + [f'    {{"job": "1.{i}"}}' + ("," if i < 9 else "")
                                                for i in range(10)]


def test_rows_are_one_a_line_and_the_top_is_laid_out():
    doc = {"time": 5, "matches": [{"job": "1.0", "slot": "s1"}, {"job": "1.1", "slot": "s2"}],
           "groups": {"a": {"quota": 1.5}}, "empty": [], "none": {}, "odd": object(),
           "nan": math.inf}
    lines = document(doc).splitlines()
    assert lines[0] == "{" and lines[-1] == "}"
    assert '    {"job": "1.0", "slot": "s1"},' in lines
    assert '    {"job": "1.1", "slot": "s2"}' in lines
    assert '  "groups": {' in lines and '    "a": {"quota": 1.5}' in lines
    assert '  "empty": [],' in lines and '  "none": {},' in lines
    assert any(line.startswith('  "odd": "<object object') for line in lines)   # default=str
    assert lines[-2] == '  "nan": Infinity'
