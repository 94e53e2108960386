"""Articulated figures: ten rigid parts joined in a kinematic tree, drawn as filled shapes.

The parts (slot order, `PARTS`): torso, head, and per side an upper and a lower arm and an
upper and a lower leg. "left" is the figure's own left, which faces the viewer: on the screen's
right (+x) when the torso is upright. Each part is a shape in its canonical frame (`Ellipse`,
`RoundedBox`) whose long axis is canonical +y, from the joint with its parent (proximal) to the
far end, length 1; its pose (schema `pose`) is its centre, its angle on the image and its length
in pixels. The torso is the root; `PARENT` gives the tree.

Kinematics, frame t (angles in the schema's convention; a part's angle is its parent's plus its
joint angle):
- the root's centre c + v t, its angle a0 (plus w t with --motion conformal) and the figure's
  scale F (times exp(g t) with --motion conformal);
- a joint sits at point j_p of the parent's canonical frame and j_c of the child's, and the
  child's centre is placed so that the two coincide: c_c = c_p + s_p R(a_p) j_p - s_c R(a_c) j_c
  (s: lengths in pixels). So a child turns about its joint and carries its children with it;
- each joint angle starts uniform within its limits and changes by a constant step per frame,
  reflected at the limits (`_reflect`), so it stays within them over any number of frames.
The figure is then shifted (the same shift in every frame, so the motion is unchanged) to lie
inside the image with a pixel of margin where it fits. Limits are written for the right side
(positive: away from the body); the left side's angles are their mirror (negated).

Depth order (schema `depth`): per sample one side is near the viewer; back to front: the far
arm, the far leg, the torso, the near leg, the head, the near arm (upper before lower).
So an arm swung across the body passes in front of the torso or behind it, and crossed legs
hide one another.

Colours: ten hues evenly spaced on the colour wheel from a random start, shuffled among the
parts (each its own colour); the background flat, each channel 181..255 as Geo's.

Letters: T frames, S = 10 parts.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geogen.scene import HIGH_MIN, LOG_SCALE_RANGE, ROTATION_RANGE, Scene

PARTS: tuple[str, ...] = (
    "torso", "head",
    "left_upper_arm", "left_lower_arm", "right_upper_arm", "right_lower_arm",
    "left_upper_leg", "left_lower_leg", "right_upper_leg", "right_lower_leg",
)
S = len(PARTS)
PARENT: tuple[int, ...] = (-1, 0, 0, 2, 0, 4, 0, 6, 0, 8)   # index of each part's parent
CLASSES: tuple[str, ...] = ("figure",)   # one class: every sample is a whole figure
# The whole limbs (the paper's Exercise parts are limbs, not their halves).
GROUPS: dict[str, tuple[str, ...]] = {
    "torso": ("torso",), "head": ("head",),
    "left arm": ("left_upper_arm", "left_lower_arm"),
    "right arm": ("right_upper_arm", "right_lower_arm"),
    "left leg": ("left_upper_leg", "left_lower_leg"),
    "right leg": ("right_upper_leg", "right_lower_leg"),
}


@dataclass(frozen=True)
class _Part:
    """A part's shape in its canonical frame: length 1 along y, `width` across.

    A subclass gives its constants as `terms()` (n,) and its tests as static functions of
    canonical x, y and terms (n, ...) broadcast against them (`distance`, `covers`), so that
    `geogen.render_parts` evaluates many parts of one class in one call, each point with its
    own part's terms. They are float64 and are cast to the points' dtype, as the Python
    floats of one part's formula would be."""
    width: float

    @property
    def half_extents(self) -> tuple[float, float]:
        return 0.5 * self.width, 0.5

    def terms(self) -> np.ndarray:
        raise NotImplementedError

    def signed_distance(self, u: np.ndarray) -> np.ndarray:
        return self.distance(u[..., 0], u[..., 1], self.terms())

    def inside(self, u: np.ndarray) -> np.ndarray:
        return self.covers(u[..., 0], u[..., 1], self.terms())


@dataclass(frozen=True)
class Ellipse(_Part):
    """Ellipse of length 1 along canonical y and `width` across."""

    def terms(self) -> np.ndarray:
        a, b = 0.5 * self.width, 0.5   # the semi-axes
        return np.array([a, b, min(a, b)])

    @staticmethod
    def distance(x: np.ndarray, y: np.ndarray, terms: np.ndarray) -> np.ndarray:
        # (|u / axes| - 1) min(axes): scaling by 1/min(axes) at most stretches distances that
        # much, so |value| never exceeds the true distance on either side (render's promise).
        a, b, m = np.asarray(terms, x.dtype)
        return (np.sqrt((x / a) ** 2 + (y / b) ** 2) - 1.0) * m

    @staticmethod
    def covers(x: np.ndarray, y: np.ndarray, terms: np.ndarray) -> np.ndarray:
        a, b, _ = np.asarray(terms, x.dtype)
        return (x / a) ** 2 + (y / b) ** 2 < 1.0


@dataclass(frozen=True)
class RoundedBox(_Part):
    """Box of length 1 along canonical y and `width` across, corners rounded with `radius`
    (at most width / 2: a capsule)."""
    radius: float = 0.0

    def terms(self) -> np.ndarray:
        r = self.radius   # the half sides of the box shrunk by r, r, and r^2
        return np.array([0.5 * self.width - r, 0.5 - r, r, r * r])

    @staticmethod
    def distance(x: np.ndarray, y: np.ndarray, terms: np.ndarray) -> np.ndarray:
        # The exact distance of a rounded box: a box shrunk by r, then grown by r.
        hx, hy, r, _ = np.asarray(terms, x.dtype)
        qx, qy = np.abs(x) - hx, np.abs(y) - hy
        outside = np.sqrt(np.maximum(qx, 0) ** 2 + np.maximum(qy, 0) ** 2)
        return outside + np.minimum(np.maximum(qx, qy), 0) - r

    @staticmethod
    def covers(x: np.ndarray, y: np.ndarray, terms: np.ndarray) -> np.ndarray:
        # distance < 0 without the square root: within r of the shrunk box.
        hx, hy, _, r2 = np.asarray(terms, x.dtype)
        qx = np.maximum(np.abs(x) - hx, 0)
        qy = np.maximum(np.abs(y) - hy, 0)
        return qx * qx + qy * qy < r2


@dataclass(frozen=True)
class PartSpec:
    """One part's build: length and width in units of the figure's scale F, shape, joint."""
    length: float
    width: float
    shape: str                        # "ellipse", "box" (torso) or "capsule"
    joint_parent: tuple[float, float]  # the joint in the parent's canonical frame (right side)
    joint_self: tuple[float, float]    # the same point in the part's own canonical frame
    limits: tuple[float, float]        # joint angle range, radians (right side: + is outward)


def _capsule_end(length: float, width: float) -> float:
    """Canonical y of a capsule's end-cap centre: a limb turns about the middle of its cap."""
    return 0.5 - 0.5 * width / length


# Lengths in units of F (about the figure's stature, head to feet, when standing).
_TORSO_L, _TORSO_W = 0.34, 0.20
_UARM = (0.19, 0.075)
_LARM = (0.18, 0.065)
_ULEG = (0.24, 0.10)
_LLEG = (0.24, 0.08)
# Joints in the torso's canonical frame (its length 1): a shoulder near the side, so a hanging
# arm overlaps the torso by about half its width; hips far enough apart that standing legs
# just miss each other. Both lie inside the torso's rounded corners by more than a pixel.
_SHOULDER_X = 0.5 * _TORSO_W / _TORSO_L * 0.85 - 0.06   # 0.85: the slimmest build
_HIP_X = 0.16

# Right-side parts; the left side is their mirror. Limits in radians, + away from the body:
# a shoulder from across the chest (-0.6, the arm passes over or under the torso) to above
# the head (2.8); an elbow folding inward to 2.3; a hip from crossed (-0.35) to a side kick
# (1.4); a knee folding outward to 2.0; the neck +-0.5.
_RIGHT: dict[str, PartSpec] = {
    "torso": PartSpec(_TORSO_L, _TORSO_W, "box", (0.0, 0.0), (0.0, 0.0), (-0.35, 0.35)),
    "head": PartSpec(0.15, 0.12, "ellipse", (0.0, -0.42), (0.0, 0.32), (-0.5, 0.5)),
    "upper_arm": PartSpec(*_UARM, "capsule", (-_SHOULDER_X, -0.36),
                          (0.0, -_capsule_end(*_UARM)), (-0.6, 2.8)),
    "lower_arm": PartSpec(*_LARM, "capsule", (0.0, _capsule_end(*_UARM)),
                          (0.0, -_capsule_end(*_LARM)), (-2.3, 0.3)),
    "upper_leg": PartSpec(*_ULEG, "capsule", (-_HIP_X, 0.40),
                          (0.0, -_capsule_end(*_ULEG)), (-0.35, 1.4)),
    "lower_leg": PartSpec(*_LLEG, "capsule", (0.0, _capsule_end(*_ULEG)),
                          (0.0, -_capsule_end(*_LLEG)), (-0.2, 2.0)),
}

SCALE_RANGE = (0.7, 0.85)     # F as a fraction of the image side L
BUILD_RANGE = (0.85, 1.15)    # one factor on every width: slim to stocky
OFFSET_RANGE = 0.08           # root centre: image centre + uniform offset, fraction of L
MOTION_RANGE = 0.06           # root translation per frame, fraction of L
JOINT_STEP = 0.3              # joint angle change per frame, radians (~17 degrees at most)
SATURATION_RANGE = (0.55, 0.95)
VALUE_RANGE = (0.45, 0.85)    # darker than the light background


def spec(part: str) -> tuple[PartSpec, float]:
    """(the part's build, its side's sign: +1 right, -1 left, which mirrors x and angles)."""
    side, _, kind = part.partition("_")
    if side in ("left", "right"):
        return _RIGHT[kind], (-1.0 if side == "left" else 1.0)
    return _RIGHT[part], 1.0


def depth_order(near_left: bool) -> tuple[int, ...]:
    """The slots back to front (module docstring)."""
    near, far = ("left", "right") if near_left else ("right", "left")
    names = [f"{far}_upper_arm", f"{far}_lower_arm", f"{far}_upper_leg", f"{far}_lower_leg",
             "torso", f"{near}_upper_leg", f"{near}_lower_leg", "head",
             f"{near}_upper_arm", f"{near}_lower_arm"]
    return tuple(PARTS.index(n) for n in names)


def _reflect(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """x folded back into [lo, hi] at its ends (a triangle wave of period 2 (hi - lo))."""
    span = hi - lo
    y = np.mod(x - lo, 2 * span)
    return lo + np.where(y <= span, y, 2 * span - y)


def _colours(rng: np.random.Generator) -> np.ndarray:
    """S colours of evenly spaced hues from a random start, shuffled: (S, 3) uint8."""
    hues = (rng.uniform() + np.arange(S) / S) % 1.0                        # (S,)
    sat = rng.uniform(*SATURATION_RANGE, size=S)                          # (S,)
    val = rng.uniform(*VALUE_RANGE, size=S)                               # (S,)
    # HSV -> RGB (colorsys's formula, for all S at once): the hue's sextant picks which of
    # v, v (1 - s f), v (1 - s (1 - f)), v (1 - s) each channel takes.
    sextant = np.floor(hues * 6.0)                                        # (S,)
    f = hues * 6.0 - sextant
    levels = np.stack([val, val * (1 - sat * f), val * (1 - sat * (1 - f)), val * (1 - sat)])
    rgb = levels[_HSV_ORDER[sextant.astype(int) % 6], np.arange(S)[:, None]]   # (S, 3)
    return np.rint(rgb[rng.permutation(S)] * 255).astype(np.uint8)       # (S, 3)


def kinds(build: float) -> tuple:
    """Each part's shape (geogen.render.signed_distance) for a width factor `build`."""
    out = []
    for part in PARTS:
        p, _ = spec(part)
        w = p.width * build / p.length   # canonical: length 1
        if p.shape == "ellipse":
            out.append(Ellipse(w))
        elif p.shape == "box":
            out.append(RoundedBox(w, 0.3 * w))
        else:
            out.append(RoundedBox(w, 0.5 * w))
    return tuple(out)


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Each part's length (S,), its joint in its parent's frame and in its own (S, 2), with
    the side's mirror applied, and the parts by depth in the tree (root first)."""
    length, j_parent, j_self = np.zeros(S), np.zeros((S, 2)), np.zeros((S, 2))
    for i, part in enumerate(PARTS):
        p, sign = spec(part)
        length[i] = p.length
        j_parent[i] = sign * p.joint_parent[0], p.joint_parent[1]
        j_self[i] = sign * p.joint_self[0], p.joint_self[1]
    level = [0] * S
    for i in range(S):
        level[i] = 0 if PARENT[i] < 0 else level[PARENT[i]] + 1
    levels = tuple(np.flatnonzero(np.array(level) == d) for d in range(1, max(level) + 1))
    return length, j_parent, j_self, levels


_LENGTH, _J_PARENT, _J_SELF, _LEVELS = _tables()
_PARENTS = np.array(PARENT)
_SIGN = np.array([spec(p)[1] for p in PARTS])                             # (S,) -1 left
_LIMITS = np.array([spec(p)[0].limits for p in PARTS]).T                  # (2, S) lo, hi
_CORNER_SIGNS = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]])      # (4, 2) of a box
# colorsys's channel order per hue sextant, as indices into (v, q, t, p) of `_colours`.
_HSV_ORDER = np.array([[0, 2, 3], [1, 0, 3], [3, 0, 2], [3, 1, 0], [2, 3, 0], [0, 3, 1]])


def _rotate(a: np.ndarray, p: np.ndarray) -> np.ndarray:
    """R(a) p for angles a (T, n) and points p (n, 2) -> (T, n, 2)."""
    c, s = np.cos(a), np.sin(a)
    return np.stack([c * p[:, 0] - s * p[:, 1], s * p[:, 0] + c * p[:, 1]], -1)


def forward(root_xy: np.ndarray, root_angle: np.ndarray, scale: np.ndarray,
            joint: np.ndarray) -> np.ndarray:
    """Poses (T, S, 4) from the root's centre (T, 2), angle (T,), the figure's scale F in
    pixels (T,) and the joint angles (T, S) (the root's entry unused); a level of the tree
    at a time (module docstring: c_c = c_p + s_p R(a_p) j_p - s_c R(a_c) j_c)."""
    T = len(root_angle)
    pose = np.zeros((T, S, 4))                                            # (T, S, 4)
    pose[:, 0, :2], pose[:, 0, 2] = root_xy, root_angle
    pose[..., 3] = _LENGTH[None] * scale[:, None]                         # (T, S)
    for idx in _LEVELS:   # parents come a level before their children
        pose[:, idx, 2] = pose[:, _PARENTS[idx], 2] + joint[:, idx]       # (T, n)
    # Every joint's two arms at once, s_p R(a_p) j_p and s_c R(a_c) j_c (the root's unused);
    # then the centres, a level at a time.
    arm_parent = pose[:, _PARENTS, 3:4] * _rotate(pose[:, _PARENTS, 2], _J_PARENT)   # (T, S, 2)
    arm_self = pose[..., 3:4] * _rotate(pose[..., 2], _J_SELF)            # (T, S, 2)
    for idx in _LEVELS:
        pose[:, idx, :2] = pose[:, _PARENTS[idx], :2] + arm_parent[:, idx] - arm_self[:, idx]
    return pose


def joint_points(pose: np.ndarray) -> np.ndarray:
    """Where each part meets its parent on the image, (T, S, 2) from the child's pose (the
    root's entry is its centre): the point both parts share."""
    pose = np.asarray(pose, np.float64)
    out = pose[..., :2].copy()                                            # (T, S, 2)
    out[:, 1:] += pose[:, 1:, 3:4] * _rotate(pose[:, 1:, 2], _J_SELF[1:])
    return out


def _fit(pose: np.ndarray, shapes: tuple, size: int) -> None:
    """Shift every centre (in place) so that the figure's box over all frames lies inside
    the image with a pixel of margin, or is centred on the axis where it does not fit."""
    # Each part's box corners, rounded to float32 first (the shift stays what it was).
    half = np.array([shape.half_extents for shape in shapes], np.float32)  # (S, 2)
    corners = _CORNER_SIGNS * half.astype(np.float64)[:, None]            # (S, 4, 2)
    a, k = pose[..., 2:3], pose[..., 3:4]                                 # (T, S, 1)
    c, s = np.cos(a), np.sin(a)
    x = pose[..., 0:1] + k * (c * corners[None, :, :, 0] - s * corners[None, :, :, 1])
    y = pose[..., 1:2] + k * (s * corners[None, :, :, 0] + c * corners[None, :, :, 1])
    lo, hi = np.array([x.min(), y.min()]), np.array([x.max(), y.max()])  # (2,)
    shift = np.where(hi - lo > size - 2, 0.5 * size - 0.5 * (lo + hi),
                     np.clip(0.0, 1.0 - lo, size - 1.0 - hi))
    pose[..., :2] += shift


def sample_figure_scene(rng: np.random.Generator, size: int, frames: int,
                        motion: str = "translation") -> Scene:
    """Draw one articulated figure (module docstring) with T = `frames` frames at side `size`.

    The draws come in a fixed order, all of them whatever their use, and the conformal
    ones last, so a translation sample's stream is a prefix of its conformal twin's."""
    L = float(size)
    colours = _colours(rng)                                               # (S, 3)
    background = rng.integers(HIGH_MIN, 256, size=3).astype(np.uint8)     # (3,)
    near_left = bool(rng.integers(0, 2))
    F = rng.uniform(*SCALE_RANGE) * L
    build = rng.uniform(*BUILD_RANGE)
    centre = L / 2 + rng.uniform(-OFFSET_RANGE, OFFSET_RANGE, size=2) * L   # (2,)
    velocity = rng.uniform(-MOTION_RANGE, MOTION_RANGE, size=2) * L         # (2,) px/frame
    lo, hi = _LIMITS                                                      # (S,), (S,)
    start = rng.uniform(lo, hi)                                           # (S,)
    step = rng.uniform(-JOINT_STEP, JOINT_STEP, size=S)                   # (S,) rad per frame
    turn = rng.uniform(-ROTATION_RANGE, ROTATION_RANGE)
    grow = rng.uniform(-LOG_SCALE_RANGE, LOG_SCALE_RANGE)

    t = np.arange(frames, dtype=np.float64)                               # (T,)
    joint = _reflect(start[None] + step[None] * t[:, None], lo, hi) * _SIGN   # (T, S)
    joint[:, 0] = start[0]   # the root's "joint" is its angle on the image
    if motion == "conformal":
        joint[:, 0] += turn * t
        scale = F * np.exp(grow * t)                                      # (T,)
    else:
        scale = np.full(frames, F)
    shapes = kinds(build)
    pose = forward(centre[None] + t[:, None] * velocity[None], joint[:, 0], scale, joint)
    _fit(pose, shapes, size)
    order = depth_order(near_left)
    depth = np.empty(S, np.uint8)
    depth[list(order)] = np.arange(S)                                     # (S,) rank per slot
    return Scene(pose=pose.astype(np.float32), present=np.ones(S, bool), label=0,
                 colours=colours, background=background, kinds=shapes, order=order,
                 extra={"joint_angle": joint.astype(np.float32), "depth": depth})
