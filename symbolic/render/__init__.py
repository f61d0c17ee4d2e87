"""Renderers: the terminal bill, the LaTeX formula sheet, the HTML calculator,
the memory pictures. Every output reads the engine's expressions; none holds a
formula.

May import every folder of the engine (core to claims); not the commands.
"""
