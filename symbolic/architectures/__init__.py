"""Architecture inventories: what a layer saves, holds and multiplies."""
