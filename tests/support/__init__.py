"""Helpers the tests share (stores, worlds, app driving), kept out of the test modules so no test
module imports another."""
