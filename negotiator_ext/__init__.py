"""negotiator-ext: a shadow and what-if HTCondor negotiator beside a real pool.

Layout:
  core/      the negotiator's rules (accountant, groups, ...): plain data in, decisions out;
             no bindings, no files, no clock (time is always passed in).
  adapters/  everything that touches the outside: HTCondor config through htcondor2,
             snapshot directories, live pools through htcondor2.
  views/     renderings for people and machines (condor_userprio tables, JSON, ClassAds).
  cli.py     the `negotiator-ext` command.
"""

__version__ = "0.1.0"
