from .compare import VERIFY_COLUMNS as VERIFY_COLUMNS
from .runner import verify_dir as verify_dir
