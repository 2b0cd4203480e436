"""Which attributes expressions reach in an ad given as attribute texts.

The matcher (core.matchmaking) keys every evaluation by what it can see: the texts of the
names an expression mentions, and of the names those texts mention in turn. `Projector`
walks that closure over texts, cached by the ads' expression structure; `closure` and
`reach_back` are the walks themselves."""

from __future__ import annotations

from typing import Any, Callable, Iterable

LITERAL = object()   # a text that names no attribute: its value never reaches further


class Projector:
    """Which attributes a set of root names reaches in an ad given as attribute texts
    (`get(name)` -> text or None), summarized by `finish(read)`, cached by the ad's
    expression structure.

    The closure is walked level by level: the roots, then the names their texts
    mention that were not read yet, and so on. Only expression texts decide where the
    walk goes, so a level is keyed by its texts with every literal replaced by LITERAL:
    slots that differ only in numbers and strings share one path, and an ad costs a
    few tuple lookups, not a walk. `finish` gets every name read, mapped to its text,
    LITERAL, or None (the ad lacks it); it must not depend on literal values (callers
    read those from the ad)."""

    def __init__(self, roots: Iterable[str], names_of: Callable[[str], frozenset],
                 finish: Callable[[dict], Any]):
        self._names_of = names_of
        self._finish = finish
        self._shapes = _Shapes(names_of)
        self._root = self._node(tuple(sorted(n for n in roots if "." not in n)), {})

    @staticmethod
    def _node(names: tuple, read: dict) -> list:
        return [names, {}, read, None]    # names to read, children, read so far, result

    def __call__(self, get: Callable[[str], str | None]) -> Any:
        node = self._root
        shape = self._shapes.__getitem__
        while True:
            names, children, read, done = node
            if done is not None:
                return done[0]
            key = tuple(map(shape, map(get, names)))
            child = children.get(key)
            if child is None:
                child = children[key] = self._expand(node, key)
            node = child

    def _expand(self, node: list, key: tuple) -> list:
        names, _, read, _ = node
        read = dict(read)
        read.update(zip(names, key))
        nxt = set()
        for t in key:
            if t is not None and t is not LITERAL:
                nxt.update(n for n in self._names_of(t) if "." not in n and n not in read)
        child = self._node(tuple(sorted(nxt)), read)
        if not nxt:
            child[3] = (self._finish(read),)
        return child


class _Shapes(dict):
    """text -> the text itself when it names an attribute, else LITERAL; None -> None."""

    def __init__(self, names_of):
        super().__init__({None: None})
        self._names_of = names_of

    def __missing__(self, text: str):
        shape = LITERAL
        if not ("0" <= text[0] <= "9" and _is_number(text)) and self._names_of(text):
            shape = text
        if len(self) < 200_000:     # unique numbers (run times, dates) are not kept forever
            self[text] = shape
        return shape


def _is_number(text: str) -> bool:
    if "_" in text:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def reach_back(read: dict, roots: Iterable[str], names_of) -> set[str]:
    """What an ad's attributes `roots` (those it has) reach in the other ad when they
    are evaluated for it: TARGET.x (as x), other scopes, and unscoped names the ad lacks
    (looked up in the other ad). Names in `roots` the ad lacks reach nothing."""
    seen: set[str] = set()
    out: set[str] = set()
    stack = [r for r in roots if "." not in r and read.get(r) is not None]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        t = read[n]
        if t is LITERAL:
            continue
        for m in names_of(t):
            if m.startswith("target."):
                out.add(m[7:])
            elif "." in m:
                out.add(m)
            elif read.get(m) is None:
                out.add(m)
            else:
                stack.append(m)
    return out


def closure(read: dict, roots: Iterable[str], names_of) -> tuple[set[str], set[str]]:
    """The attributes an ad (`read`: name -> text, LITERAL or None) reaches from
    `roots`, and the names it looks up outside itself: TARGET.x (as x), other scopes
    (as written), names it lacks."""
    seen: set[str] = set()
    outside: set[str] = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n.startswith("target."):
            outside.add(n[7:])
            continue
        if "." in n:           # another scope (a nested ad); look it up as a whole
            outside.add(n)
            continue
        if n in seen:
            continue
        t = read.get(n)
        if t is None:
            outside.add(n)
            continue
        seen.add(n)
        if t is not LITERAL:
            stack.extend(names_of(t))
    return seen, outside
