"""Pure planning: dependency graph, interrupt merge, batch math and the planner."""
