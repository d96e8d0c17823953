"""Data in and out of a store: session documents (export, import, copy) and other formats."""
