"""Many layouts at once: ``plan`` ranks every valid layout of a GPU count,
``solve`` finds the largest micro-batch or sequence that fits.

May import the folders below it: core, models, layout, ledgers, bill, step.

The rooms, in the order a plan's data flows through them (DESIGN's data flow: ledgers, then lambdify
for sweeps and planning):

    enumeration  every valid layout of N GPUs as int64 columns (t, p, d, c, e, e_t, b, v, ZeRO, SP,
                 recompute), by Layout.is_valid, the rule set every command applies
    formulas     per discrete choice (Group): the bill's ledgers as expressions, cached as text
                 (GroupFormulas), read by the guarded reader into numpy and exact functions
    verdict      those formulas over arrays of layouts (sweep: blocks, kernel.py's compiled kernel,
                 native.py's C loop), and exactly for one layout (exact_totals)
    pricing      the bill's time derivation per group priced over arrays (ledgers.time.price)
    plan         ranking: fits, fastest per sequence, what binds each layout (Plan, Planned);
                 re-exports the names above that callers have always imported from it
    solve        the largest micro-batch or sequence that fits, exactly (one layout's formulas)
    throughput   the published runs each priced by plan, against their measured step times

What a plan prints is render/plan.py; the command's options, commands/plan.py.
"""
