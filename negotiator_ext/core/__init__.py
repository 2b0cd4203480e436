"""The pure core: the negotiator's and accountant's rules.

Plain data in, decisions out. Nothing here imports htcondor2, opens a file, or reads the
clock; classad2 is used only through `core.classads`.
"""
