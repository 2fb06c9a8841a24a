"""Physics terms: particles and springs, ground contact, tetrahedral FEM, cloth, rigid bodies, and the
element loops they share."""
