"""Query side: query building, fusion scoring, entity tiers, response assembly."""
