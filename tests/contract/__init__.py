"""The source contract suite every queue source passes, and its runs per source."""
