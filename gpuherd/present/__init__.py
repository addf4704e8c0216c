"""Values as text: units, rounding, escapes (`format`), and points a chart can draw."""
