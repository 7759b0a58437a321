"""The layout of `Machine.freeze()` as the checker reads it (the parts its key numbers, and
where the symmetry renaming finds an agent's name)."""

F_OWED, F_REGS, F_TMA, F_BULK, F_TC, F_META, F_STATUS = 3, 4, 5, 6, 7, 8, 9
TC_AGENT = 4
"""Where a tensor-core queue entry names the agent that issued it."""
