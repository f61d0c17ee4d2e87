"""Renderers: the terminal bill, the LaTeX formula sheet, the HTML calculator,
the memory pictures, and each command's printed form (plan, solve, timeline,
derive: what the command prints is what the Python API's results render).
Every output reads the engine's expressions; none holds a formula.

May import every folder of the engine (core to claims); not the commands.
"""
