"""Joint NLU: one model of intents, slots and out-of-scope from a team's own annotated examples."""
