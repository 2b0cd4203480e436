"""Adapters: the only code that touches HTCondor's bindings, files, or the clock."""
