"""The sources' claims (``derivations/*.toml``) checked against the engine, the
golden files of the derived results, and every named quantity loaded.

May import every folder of the engine below it (core to search).
"""
