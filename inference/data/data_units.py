"""The way back from a transformed held-out split's standard units to the data's own, row by row
(:class:`DataUnits`, made by :meth:`~ppl_models.inference.data.transforms.SeriesTransform.units`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

__all__ = ["DataUnits"]


@dataclass
class DataUnits:
    """The way back from a transformed held-out split's standard units to the data's own, row by row.

    ``offset``, ``scale`` ``[N, D]``: ``u = offset + scale z`` undoes the global standardiser and the per-series
    scaling; ``data`` ``[N, T, D]``: the rows as read (float64, 1 after each row's end), ``lengths`` ``[N]`` their
    steps; ``log``: ``u`` is in log space (its leading ``logged`` columns, the forecast ones; ``None``: every
    one); ``lag``: the differencing lag ``L`` (position ``t'`` of a transformed row is data step ``t' + L``);
    ``profile`` ``[N, m, D]`` (log space with log): each row's seasonal profile, removed before differencing (data
    step ``t`` has place ``t mod m``; ``None``: none). Methods take the rows ``index`` ``[b]`` a batch holds
    (default: every row).
    """

    offset: torch.Tensor
    scale: torch.Tensor
    data: torch.Tensor
    lengths: torch.Tensor
    log: bool = False
    lag: int = 0
    features: list[str] = field(default_factory=list)
    profile: torch.Tensor | None = None
    logged: int | None = None

    @property
    def positions(self) -> int:
        """The transformed rows' longest length: ``T - lag``."""
        return self.data.shape[1] - self.lag

    @property
    def observed(self) -> torch.Tensor:
        """``[N, T - L, D]``: the data as read at each transformed position (data step ``t' + L``)."""
        return self.data[:, self.lag :]

    def check(self, like: torch.Tensor) -> None:
        """Raise ``ValueError`` unless ``like [N, T', D]`` (the transformed data) fits these rows."""
        rows, features = self.offset.shape
        if like.dim() != 3 or list(like.shape) != [rows, self.positions, features]:
            raise ValueError(
                f"standardizer: DataUnits of {rows} rows of {self.positions} steps and {features} "
                f"features (another split's?) for data of shape {list(like.shape)}"
            )

    def values(self, z: torch.Tensor, index: torch.Tensor | None = None, start: int = 0) -> torch.Tensor:
        """One-step values ``z [..., b, H, D]`` of positions ``start ..`` of rows ``index``, in the data's units
        (float64): each from the observed level ``L`` steps before it, with its place in the season."""
        index = self._rows(index)
        u = self._affine(z, index)
        steps = z.shape[-2]
        if self.lag:
            u = u + self.levels_at(index, slice(start, start + steps))
        u = u + self.seasonal_at(index, slice(start + self.lag, start + self.lag + steps))
        return self._from_log(u)

    def observed_at(self, index: torch.Tensor | None = None, steps: int | None = None, start: int = 0) -> torch.Tensor:
        """``[b, steps, D]``: the data as read at positions ``start ..`` of rows ``index`` (default: to the end)."""
        index = self._rows(index)
        stop = self.positions if steps is None else start + steps
        return self.observed[index, start:stop]

    def log_jacobian(self, index: torch.Tensor | None = None, steps: int | None = None) -> torch.Tensor:
        """``[b, steps]``: ``log |dz / dx_t|`` at each position of rows ``index``: ``- sum_d log scale_d`` and, with
        log, ``- sum_d log x_{t,d}`` (0 after a row's end)."""
        index = self._rows(index)
        steps = self.positions if steps is None else steps
        jacobian = -self.scale[index].log().sum(-1, keepdim=True).expand(len(index), steps)
        if self.log:
            jacobian = jacobian - self.observed_at(index, steps)[..., : self.logged].log().sum(-1)
        return jacobian

    def forecast(self, z: torch.Tensor, index: torch.Tensor | None = None, start=None) -> torch.Tensor:
        """Forecast draws ``z [S, b, H, D]`` of the positions after each row's first ``start`` (an int or ``[b]``;
        default: the row's end) in the data's units (float64): each difference added to the observed or forecast
        level ``L`` steps before (less its profile), the step's profile added, then ``exp`` with log."""
        index = self._rows(index)
        u = self._affine(z, index)
        ends = self.lengths[index] - self.lag
        start = ends if start is None else torch.as_tensor(start).expand(len(index))
        if bool((start > ends).any()) or bool((start < 0).any()):
            raise ValueError(f"start: each row's forecast starts within its {ends.tolist()} transformed steps")
        if self.lag:
            levels = torch.empty_like(u)
            for h in range(u.shape[-2]):
                before = self.levels_at(index, start + h) if h < self.lag else levels[..., h - self.lag, :]
                levels[..., h, :] = u[..., h, :] + before
            u = levels
        u = u + self.seasonal_at(index, start.unsqueeze(-1) + self.lag + torch.arange(u.shape[-2]))
        return self._from_log(u)

    def leading(self, columns: int) -> DataUnits:
        """These units of the leading ``columns`` features only (the targets, where covariates follow them)."""
        if columns == self.offset.shape[1]:
            return self
        kept = slice(0, columns)
        return dataclasses.replace(
            self,
            offset=self.offset[:, kept],
            scale=self.scale[:, kept],
            data=self.data[..., kept],
            features=self.features[kept],
            profile=None if self.profile is None else self.profile[..., kept],
            logged=columns if self.logged is None else min(self.logged, columns),
        )

    def _from_log(self, u: torch.Tensor) -> torch.Tensor:
        """``u [..., D]`` with its logged columns exponentiated (under log)."""
        return self._columnwise(u, torch.exp)

    def _to_log(self, data: torch.Tensor) -> torch.Tensor:
        """``data [..., D]`` with its logged columns in log space (under log)."""
        return self._columnwise(data, torch.log)

    def _columnwise(self, values: torch.Tensor, function) -> torch.Tensor:
        if not self.log:
            return values
        if self.logged is None:
            return function(values)
        return torch.cat([function(values[..., : self.logged]), values[..., self.logged :]], -1)

    def _rows(self, index) -> torch.Tensor:
        return torch.arange(self.offset.shape[0]) if index is None else torch.as_tensor(index).cpu()

    def _affine(self, z: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``offset + scale z`` of rows ``index``, ``z [..., b, H, D]`` (float64, on the CPU)."""
        return self.offset[index].unsqueeze(-2) + self.scale[index].unsqueeze(-2) * z.detach().double().cpu()

    def levels_at(self, rows, steps) -> torch.Tensor:
        """The data as read at ``data[rows, steps]``, in log space with log, less the profile there (only those
        entries taken): the level a difference is taken from."""
        return self._to_log(self.data[rows, steps]) - self.seasonal_at(rows, steps)

    def seasonal_at(self, rows, steps):
        """The profile of rows ``rows`` at data steps ``steps`` (a slice, or an index tensor broadcast against
        ``rows``), ``[..., D]``; 0 without a profile."""
        if self.profile is None:
            return 0.0
        period = self.profile.shape[1]
        if isinstance(steps, slice):
            return self.profile[rows][:, torch.arange(steps.start, steps.stop) % period]
        steps = torch.as_tensor(steps)
        if isinstance(rows, slice):
            rows = torch.arange(self.profile.shape[0])[rows]
        rows = torch.as_tensor(rows)
        return self.profile[rows.reshape(rows.shape + (1,) * (steps.dim() - rows.dim())), steps % period]
