"""masa_rules: the pure rules of masa — cards, melds, the meld solver and the game engines.

Standard library only, no I/O. The table engine, the bots and every client use this one
library, so a meld is judged the same way everywhere.
"""
