"""One module per data set or task: its loader or generator, its evaluation and its own plots."""
