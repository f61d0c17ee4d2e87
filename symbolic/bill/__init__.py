"""One model under one layout: the bill derived in sympy (:mod:`.derive`),
evaluated exactly with Fractions (:mod:`.evaluate`) and cached on disk
(:mod:`.cache`; its entries :mod:`.stored`, which ``make_bill`` reads through).

May import the folders below it: core, models, layout, ledgers.
"""
