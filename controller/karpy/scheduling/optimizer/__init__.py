"""The cost optimizer: what first-fit leaves to gain, and how far from the cheapest a plan can be.

Pure, like the rest of `karpy.scheduling`. The scheduler's first-fit core places every pod under every rule; this
package only improves its new claims afterwards (`optimize.improve`: re-pack groups of interchangeable claims
towards the pattern LP, then a bounded local search on small solves) and bounds their cost from below
(`optimize.lower_bound`). It must not be imported by the first-fit core (import-linter enforces it) and is entered
only through `optimize`, so the core places pods the same with or without it. docs/ARCHITECTURE.md, "The cost
optimizer", says what each module does and what it costs.
"""
