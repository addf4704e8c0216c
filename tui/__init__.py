"""The Textual dashboard: app, widgets, screens and UI-thread state."""
