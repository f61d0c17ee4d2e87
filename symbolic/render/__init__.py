"""Renderers: every output reads the engine's expressions; none holds a formula."""
