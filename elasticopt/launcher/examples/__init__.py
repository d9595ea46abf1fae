"""elasticopt subpackage."""
