"""Trained artefacts that several methods export, and the protocol every exported model follows."""
