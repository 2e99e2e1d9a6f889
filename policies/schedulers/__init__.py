"""Replica schedulers: the pure decision a classifier replica's loop asks for each next batch."""
