"""The daemons' ClassAd evaluation semantics for classad2.

HTCondor daemons evaluate match expressions with the "alternate scope": an unscoped
name that MY lacks is looked up in TARGET. classad2 gets the same behaviour once the
HTCondor library has read its configuration, which `import htcondor2` does (config()
runs ClassAdReconfig, which follows STRICT_CLASSAD_EVALUATION of this host's config).
"""

from __future__ import annotations


def enable() -> None:
    import htcondor2  # noqa: F401  (the import is the point: it initialises the library)
