"""apt on a node: the pinned signing keys, the site's mirror, archive components."""
