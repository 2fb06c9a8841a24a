"""Built-in material plugins (imported as tigradsim.materials)."""
