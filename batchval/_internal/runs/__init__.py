"""The engine's run, knowing no product: the command skeleton every product's command
runs through (`command`), the summary it ends with (`summary`), and a sending command
that dies with its parent (`parent`)."""
