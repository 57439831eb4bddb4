"""batchval: bulk valuations through the Partner Valuation API, never paid twice."""

__version__ = "0.1.0"
