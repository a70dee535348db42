"""The Textual app: step through a build, audit constraints, compare models, annotate."""
