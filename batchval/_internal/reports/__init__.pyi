from .report import ReportError as ReportError
from .report import write_report as write_report
