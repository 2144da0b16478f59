"""The format-neutral session: columns and kinds, keys, the tree, tool pairing by turn."""
