"""The order in which HTCondor's collector answers a query, rebuilt from the ads' keys.

The collector keeps each kind of ad (slots, submitters, ...) in a chained hash table of
its own and answers a query by walking that table: bucket 0 to the last, each bucket's
chain from its head. The negotiator takes the ads in that order, and it decides ties:
equal submitters keep it through an unstable sort, and of several equal slots the first
in it is matched. `condor_status` sorts what it prints, so a snapshot made of its output
has lost that order; this module rebuilds it from what the ads hold.

How the table behaves (HTCondor 25.14: src/condor_utils/HashTable.h, the `HashTable`
template the collector's tables are made of, `CollectorHashTable` in
src/condor_collector.V6/collector_engine.h; the keys in src/condor_utils/hashkey.cpp):

* the key hashed is a string (see `slot_key`, `submitter_key`), hashed as a C string:
  h = 33 * h + byte, for each byte up to the first NUL, in a 64-bit size_t
  (`hashFunction(const char *)`); the key's IP part takes part in equality, never in
  the hash (`adNameHashFunction`);
* a new ad goes to the head of bucket h % size (`insert`); an update of an ad already
  there replaces it in place, so its place does not move;
* the table starts with 7 buckets; after an insertion that brings the number of ads to
  0.8 times the number of buckets or more, it grows to 2 * (size + 1) - 1 buckets
  (15, 31, 63, ... 2^k - 1) (`needs_resizing`, `resize_hash_table`). Growing walks the
  old table in walk order and puts each ad at the head of its new bucket, so ads that
  meet in a new bucket come out in the reverse of their old walk order;
* the table never shrinks: removing ads leaves its size as it was.

What the ads cannot tell (see docs/snapshots.md, "The collector's order"): the order of
ads that share a bucket depends on the order in which they were inserted, and the size
of the table depends on the most ads it ever held, not on how many it holds now. This
module assumes a table that never held more ads than it holds now, filled in the order
it is given (`insertion`), and says which ads share a bucket (`shared_buckets`).
"""

from __future__ import annotations

from typing import Sequence

INITIAL_SIZE = 7
MAX_LOAD = 0.8
_MASK = (1 << 64) - 1


def key_hash(key: str) -> int:
    """The collector's hash of a key: 33 * h + byte over the key's UTF-8 bytes up to its
    first NUL, modulo 2**64."""
    h = 0
    for b in key.encode("utf-8", "surrogateescape"):
        if b == 0:
            break
        h = (h * 33 + b) & _MASK
    return h


def _grows(count: int, size: int) -> bool:
    # the collector compares as doubles: count / size >= 0.8
    return count / size >= MAX_LOAD


def _next_size(size: int) -> int:
    return (size + 1) * 2 - 1


def table_size(count: int, at_least: int = INITIAL_SIZE) -> int:
    """The number of buckets of a table that was filled up to `count` ads and never held
    more (at least `at_least`, a size the table is known to have reached)."""
    size = INITIAL_SIZE
    while size < at_least or (count > 0 and _grows(count, size)):
        size = _next_size(size)
    return size


def walk_order(keys: Sequence[str], insertion: Sequence[int] | None = None,
               at_least: int = INITIAL_SIZE) -> list[int]:
    """The indices of `keys` in the order the collector walks its table, when the ads
    were inserted in the order `insertion` (indices into `keys`; default: as given)
    into a new table (that had grown to `at_least` buckets before, when known), none
    removed since. Ads with equal keys are kept both (the collector tells them apart by
    their IP)."""
    order = range(len(keys)) if insertion is None else insertion
    hashes = [key_hash(k) for k in keys]
    size = table_size(0, at_least)
    buckets: list[list[int]] = [[] for _ in range(size)]   # each chain, head first
    count = 0
    for i in order:
        buckets[hashes[i] % size].insert(0, i)
        count += 1
        if _grows(count, size):
            new = _next_size(size)
            grown: list[list[int]] = [[] for _ in range(new)]
            for chain in buckets:
                for j in chain:
                    grown[hashes[j] % new].insert(0, j)
            buckets, size = grown, new
    return [i for chain in buckets for i in chain]


def shared_buckets(keys: Sequence[str], at_least: int = INITIAL_SIZE) -> list[bool]:
    """For each key: whether its ad shares its bucket of the full table with another ad
    (then its place among them depends on the order the ads were inserted in, unless
    the table grew after they all were)."""
    size = table_size(len(keys), at_least)
    where = [key_hash(k) % size for k in keys]
    seen: dict[int, int] = {}
    for b in where:
        seen[b] = seen.get(b, 0) + 1
    return [seen[b] > 1 for b in where]


def sizes_of_walk(keys_in_walk_order: Sequence[str], largest: int = (1 << 27) - 1
                  ) -> list[int]:
    """The table sizes (7, 15, ... up to `largest`, from the smallest the ads fill) whose
    walk could have given `keys_in_walk_order`: those in which the ads' buckets never go
    down along the walk. A capture in the collector's order (ours) thus tells how far its
    table has grown, which its ads alone cannot; a later snapshot of the same collector
    can be rebuilt with it (meta.json's "collector_table_sizes")."""
    hashes = [key_hash(k) for k in keys_in_walk_order]
    out = []
    size = table_size(len(hashes))
    while size <= largest:
        last = -1
        for h in hashes:
            b = h % size
            if b < last:
                break
            last = b
        else:
            out.append(size)
        size = _next_size(size)
    return out
