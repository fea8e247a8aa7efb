"""The reconcile: plan, vocabulary, decision, and the rules it applies."""
