from .export import Export as Export
from .export import Format as Format
from .export import export_dir as export_dir
from .flat import Nested as Nested
