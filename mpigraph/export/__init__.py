"""Traces other tools open: OTF2 (Vampir, Scalasca's Cube tools, pipit, Trace Compass)."""
