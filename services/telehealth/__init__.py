"""Video-visit links: a room on Daily, or the clinic's own link template."""
