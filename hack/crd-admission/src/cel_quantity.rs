//! Kubernetes' CEL quantity library (kubernetes/kubernetes
//! `staging/src/k8s.io/apiserver/pkg/cel/library/quantity.go`
//! `quantityLibraryDecls`, with the `kubernetes.Quantity` type of
//! `staging/src/k8s.io/apiserver/pkg/cel/quantity.go`): `quantity(string)`,
//! `isQuantity(string)`, `sign(q)` (a global function, as declared with
//! `cel.Overload`), and the members `isGreaterThan`, `isLessThan`,
//! `compareTo`, `asApproximateFloat`, `asInteger`, `isInteger`, `add` and
//! `sub` (with a quantity or an int). Two quantities are `==` when their
//! values are (`Quantity.Equal`).

use std::any::Any;

use cel::common::types::{CelBool, CelDouble, CelInt, CelString, Kind, Type};
use cel::common::value::{StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use crate::quantity::Quantity;

static QUANTITY_TYPE: Type = Type::simple_type(Kind::Opaque, "kubernetes.Quantity");

/// The functions whose errors are Go errors wrapped as they are
/// (`types.WrapErr`): kube-apiserver reports their text alone.
pub(crate) const WRAPPING_FUNCTIONS: &[&str] = &["quantity", "asInteger", "add", "sub"];

/// A `kubernetes.Quantity` value.
#[derive(Debug, Clone)]
pub(crate) struct CelQuantity(Quantity);

impl Val for CelQuantity {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }

    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<CelQuantity>()
            .is_some_and(|other| other.0 == self.0)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for CelQuantity {}

/// Registers the library on `env`.
pub(crate) fn library(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_type(QUANTITY_TYPE.to_owned())?;
    cel::add_overload!(env, fn quantity: (CelString) -> Result<CelQuantity>)?;
    cel::add_overload!(env, fn is_quantity: (CelString) -> CelBool)?;
    cel::add_overload!(env, fn sign: (CelQuantity) -> CelInt)?;
    cel::add_member_overload!(env, fn is_greater_than: (CelQuantity, CelQuantity) -> CelBool)?;
    cel::add_member_overload!(env, fn is_less_than: (CelQuantity, CelQuantity) -> CelBool)?;
    cel::add_member_overload!(env, fn compare_to: (CelQuantity, CelQuantity) -> CelInt)?;
    cel::add_member_overload!(env, fn as_approximate_float: (CelQuantity) -> CelDouble)?;
    cel::add_member_overload!(env, fn as_integer: (CelQuantity) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn is_integer: (CelQuantity) -> CelBool)?;
    cel::add_member_overload!(env, fn add_quantity: (CelQuantity, CelQuantity) -> Result<CelQuantity>, name = "add")?;
    cel::add_member_overload!(env, fn add_int: (CelQuantity, CelInt) -> Result<CelQuantity>, name = "add")?;
    cel::add_member_overload!(env, fn sub_quantity: (CelQuantity, CelQuantity) -> Result<CelQuantity>, name = "sub")?;
    cel::add_member_overload!(env, fn sub_int: (CelQuantity, CelInt) -> Result<CelQuantity>, name = "sub")?;
    Ok(())
}

/// `stringToQuantity`: a parse failure is the Go error, wrapped.
fn quantity(s: &CelString<'_>) -> Result<CelQuantity, ExecutionError> {
    Quantity::parse(s.inner())
        .map(CelQuantity)
        .map_err(|e| ExecutionError::function_error("quantity", e))
}

fn is_quantity(s: &CelString<'_>) -> CelBool {
    Quantity::parse(s.inner()).is_ok().into()
}

fn sign(q: &CelQuantity) -> CelInt {
    q.0.sign().into()
}

fn is_greater_than(a: &CelQuantity, b: &CelQuantity) -> CelBool {
    (a.0 > b.0).into()
}

fn is_less_than(a: &CelQuantity, b: &CelQuantity) -> CelBool {
    (a.0 < b.0).into()
}

fn compare_to(a: &CelQuantity, b: &CelQuantity) -> CelInt {
    (a.0.cmp(&b.0) as i64).into()
}

fn as_approximate_float(q: &CelQuantity) -> CelDouble {
    q.0.as_approximate_f64().into()
}

/// `quantityGetValue`.
fn as_integer(q: &CelQuantity) -> Result<CelInt, ExecutionError> {
    q.0.as_i64().map(CelInt::from).ok_or_else(|| {
        ExecutionError::function_error("asInteger", "cannot convert value to integer")
    })
}

/// `quantityCanValue`.
fn is_integer(q: &CelQuantity) -> CelBool {
    q.0.as_i64().is_some().into()
}

fn add_quantity(a: &CelQuantity, b: &CelQuantity) -> Result<CelQuantity, ExecutionError> {
    a.0.add(&b.0)
        .map(CelQuantity)
        .map_err(|e| ExecutionError::function_error("add", e))
}

/// `quantityAddInt`: the int as `NewQuantity(i, DecimalExponent)`.
fn add_int(a: &CelQuantity, b: &CelInt) -> Result<CelQuantity, ExecutionError> {
    add_quantity(a, &CelQuantity(Quantity::from_i64(*b.inner())))
}

fn sub_quantity(a: &CelQuantity, b: &CelQuantity) -> Result<CelQuantity, ExecutionError> {
    a.0.sub(&b.0)
        .map(CelQuantity)
        .map_err(|e| ExecutionError::function_error("sub", e))
}

fn sub_int(a: &CelQuantity, b: &CelInt) -> Result<CelQuantity, ExecutionError> {
    sub_quantity(a, &CelQuantity(Quantity::from_i64(*b.inner())))
}
