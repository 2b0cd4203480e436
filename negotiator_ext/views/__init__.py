"""Renderings of negotiator state for people and machines (condor_userprio tables, ...)."""
